"""Variable tracking: following the prompt's own assignments from the value asked gives the answers."""

import re

import pytest

from posenc.core.errors import ConfigError
from posenc.tasks.ruler.base import ByteTokenizer
from posenc.tasks.ruler.variable_tracking import VariableTrackingTask


@pytest.mark.parametrize("chains,hops", [(1, 4), (3, 2), (2, 6)])
def test_answers_are_the_variables_the_chain_of_the_value_reaches(chains, hops):
    task = VariableTrackingTask(chains=chains, hops=hops)
    for p in task.prompts(ByteTokenizer(), 3000):
        value = re.search(r"assigned the value (\d+) in the text above\?", p.text).group(1)
        reached = set()
        for name, rhs in re.findall(r"^VAR ([A-Z]{5}) = (VAR [A-Z]{5}|\d+)\.$", p.text, re.M):
            # in order: a variable is assigned the value, or a variable that already has it
            if rhs == value or rhs.removeprefix("VAR ") in reached:
                reached.add(name)
        assert set(p.answers) == reached and len(p.answers) == hops + 1
        assert len(re.findall(r"^VAR ", p.text, re.M)) == chains * (hops + 1)
        assert f"{hops + 1} variables are assigned the value {value}" in p.text


def test_bad_settings_are_one_line():
    with pytest.raises(ConfigError, match="task.chains and task.hops must be >= 1, got 1, 0"):
        VariableTrackingTask(hops=0)
