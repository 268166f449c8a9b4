"""`posenc --version`, shell completion of option values from the config tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import posenc
from posenc.cli.app import app
from posenc.cli.completion import options_of
from posenc.engine.config import list_options

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_one_version(flag):
    result = runner.invoke(app, [flag])
    assert result.exit_code == 0 and result.output == f"posenc {posenc.__version__}\n"
    cited = re.search(r"(?m)^version: (\S+)$", (ROOT / "CITATION.cff").read_text()).group(1)
    assert cited == posenc.__version__  # pyproject.toml reads it from posenc.__version__


def complete(words: str) -> list[str]:
    env = {"_POSENC_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
    result = runner.invoke(app, [], env=env, prog_name="posenc")
    assert result.exit_code == 0, result.output
    return result.output.split()


@pytest.mark.parametrize(
    "words, group",
    [("posenc train --pe ro", "pe"), ("posenc extrapolate --scale y", "scale"), ("posenc order --task o", "task")],
)
def test_option_values_complete_from_the_config_tree(words, group):
    prefix = words.rsplit(" ", 1)[1]
    assert complete(words) == [n for n in list_options(group) if n.startswith(prefix)] and complete(words)


def test_a_comma_list_completes_its_last_item_without_repeating_one():
    got = options_of("pe")("rope,al")
    assert got == ["rope,alibi", "rope,alibi2d"]
    assert "rope,rope" not in options_of("pe")("rope,")
    assert options_of("scale", ("all",))("a") == ["all"]
    assert complete("posenc ru") == ["runs"]
