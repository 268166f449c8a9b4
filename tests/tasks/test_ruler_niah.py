"""Needle in a haystack: the answers are what the prompt's own needles say for the keys asked,
the needle sits at its depth, distractors never reuse a key asked."""

import re

import pytest

from posenc.core.errors import ConfigError
from posenc.tasks.ruler.base import ByteTokenizer
from posenc.tasks.ruler.niah import FILLER, NeedleTask

NEEDLE = re.compile(r"One special magic (\w+) for (\S+) is (\S+)\.")


def parse(text):
    """(key, value) of every needle in the context, and the keys the question asks for."""
    needles = [(k, v) for _, k, v in NEEDLE.findall(text)]
    query = re.search(r"special magic \w+ for (.+?) in the text above\?", text).group(1)
    return needles, re.split(r", | and ", query)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"haystack": "filler"},
        {"haystack": "essay", "value_kind": "uuids"},
        {"haystack": "distractors"},
        {"haystack": "distractors", "key_kind": "uuids", "value_kind": "uuids"},
        {"haystack": "essay", "keys": 4},
        {"haystack": "essay", "values": 4},
        {"haystack": "essay", "keys": 4, "queries": 4},
        {"haystack": "filler", "keys": 3, "values": 2, "queries": 2, "key_kind": "numbers"},
    ],
)
def test_answers_are_the_values_the_needles_give_the_keys_asked(kwargs):
    task = NeedleTask(**kwargs)
    for p in task.prompts(ByteTokenizer(), 2500):
        needles, asked = parse(p.text)
        assert len(asked) == task.queries and len(set(asked)) == task.queries
        expected = [v for key in asked for k, v in needles if k == key]
        assert sorted(p.answers) == sorted(expected) and len(expected) == task.queries * task.values
        keys = {k for k, _ in needles}
        n_needles = task.keys * task.values
        if task.haystack == "distractors":  # every unit is a needle of a key never asked
            assert len(needles) == p.units + n_needles
            assert sum(k in asked for k, _ in needles) == task.queries * task.values
        else:
            assert len(needles) == n_needles and len(keys) == task.keys
        value = {"numbers": r"\d{7}", "uuids": r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"}
        assert all(re.fullmatch(value[task.value_kind], a) for a in p.answers)
        if task.haystack == "filler":
            assert p.text.count(FILLER) == p.units


@pytest.mark.parametrize("haystack", ["filler", "essay", "distractors"])
@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
def test_a_single_needle_sits_at_its_depth(haystack, depth):
    task = NeedleTask(haystack)
    p = task.prompt(ByteTokenizer(), 3000, 7, depth)
    body = p.text.split("\n", 1)[1].rsplit("\nWhat is", 1)[0]  # the context: units and the needle
    units = body.split("\n") if haystack != "essay" else None
    needle = f"One special magic number for {parse(p.text)[1][0]} is {p.answers[0]}."
    if units is not None:
        assert units.index(needle) == round(depth * p.units)
    else:
        before = body.split(needle)[0]
        assert len(re.findall(r"[.!?](?= [A-Z])", before)) >= round(depth * p.units) - 1
        assert body.startswith(needle) == (depth == 0.0) and body.endswith(needle) == (depth == 1.0)


def test_bad_settings_are_one_line():
    for kwargs, message in [
        ({"haystack": "noise"}, "task.haystack must be one of: filler, essay, distractors; got 'noise'"),
        ({"value_kind": "dates"}, "task.value_kind must be one of: words, numbers, uuids; got 'dates'"),
        ({"keys": 2, "queries": 3}, "task.queries in 1..keys, got 2, 1, 3"),
        ({"trials": 0}, "task.trials must be >= 1"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            NeedleTask(**kwargs)
