"""posenc.launch.overrides: every sweep syntax of Hydra's basic sweeper, numbered as a real Hydra
multirun numbers its job folders, and bad sweeps as one ConfigError."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import yaml

from posenc.core.errors import ConfigError
from posenc.engine.config import list_options
from posenc.launch.overrides import expand, explicit, split_overrides

SYNTAXES = [
    ["pe=rope,nope", "seed=0,1"],
    ["pe=glob(rope*)"],
    ["pe=glob(*,exclude=[rope2d*,learned2d,sincos2d,rel2d,alibi2d])", "seed=3"],
    ["seed=range(0,3)", "train.lr=choice(1e-3,2e-3)"],
    ["seed=1,2", "pe=nope", "seed=3,4"],  # a key given twice keeps its first place and its last value
    ["+extra=1,2", "~seed", "task.path='a,b.txt','c d.txt'"],
    ["experiment=extrapolation", "extrapolation.scales=[pi],[yarn]", "+extrapolation.x=0"],
]


def hydra_multirun(tmp_path: Path, overrides: list[str]) -> list[list[str]]:
    """The overrides of every job folder of a real Hydra multirun (basic launcher, no-op jobs)."""
    import hydra

    def noop(cfg) -> None:
        return None

    entry = hydra.main(config_path="pkg://posenc.configs", config_name="config", version_base="1.3")(noop)
    saved, sys.argv = sys.argv, ["x", "--multirun", f"hydra.sweep.dir={tmp_path}", *overrides]
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        entry()
    finally:
        sys.argv = saved
        root.handlers[:], root.level = handlers, level
    folders = sorted((p for p in tmp_path.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    assert [int(p.name) for p in folders] == list(range(len(folders)))
    return [yaml.safe_load((p / ".hydra" / "overrides.yaml").read_text()) for p in folders]


@pytest.mark.parametrize("overrides", SYNTAXES, ids=lambda o: " ".join(o))
def test_jobs_are_numbered_as_a_real_hydra_multirun_numbers_its_folders(tmp_path, overrides):
    jobs = expand(overrides)
    assert jobs == hydra_multirun(tmp_path / "raw", overrides)
    # the written-out sweep the launch hands Hydra runs the same jobs under the same numbers
    assert jobs == hydra_multirun(tmp_path / "explicit", explicit(overrides))


def test_each_syntax_gives_its_values():
    one_d = [o for o in list_options("pe") if "2d" not in o]
    assert expand(["pe=glob(*,exclude=[rope2d*,learned2d,sincos2d,rel2d,alibi2d])"]) == [[f"pe={o}"] for o in one_d]
    assert expand(["pe=glob(rope*)"]) == [["pe=rope"], ["pe=rope2d_axial"], ["pe=rope2d_mixed"]]
    assert expand(["seed=range(0,3)"]) == [["seed=0"], ["seed=1"], ["seed=2"]]
    assert expand(["seed=1,2", "pe=nope", "seed=3,4"]) == [["seed=3", "pe=nope"], ["seed=4", "pe=nope"]]
    assert expand(["task.path='a,b.txt','c d.txt'"]) == [["task.path='a,b.txt'"], ["task.path='c d.txt'"]]
    assert explicit(["seed=range(0,3)", "pe=glob(rope)", "train.lr=choice(1e-3,2e-3)"]) == [
        "seed=0,1,2",
        "pe=rope",
        "train.lr=0.001,0.002",
    ]
    assert sorted(map(tuple, expand(["pe=shuffle(rope,nope)"]))) == [("pe=nope",), ("pe=rope",)]


def test_glob_sees_the_researchers_own_options(tmp_path, monkeypatch):
    (tmp_path / "pe").mkdir()
    (tmp_path / "pe" / "rope_mine.yaml").write_text("description: mine\n_target_: posenc.pe.rope.RoPE\n")
    monkeypatch.setenv("POSENC_CONFIG_DIR", str(tmp_path))
    assert expand(["pe=glob(rope*,exclude=rope2d*)"]) == [["pe=rope"], ["pe=rope_mine"]]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["pe=glob(zzz*)"], "'pe=glob(zzz*)' matches no pe option; valid: alibi, "),
        (["train.lr=interval(0,1)"], "'train.lr': interval sweeps need a sweeper that samples"),
        (["pe=rope,"], "cannot parse sweep override: "),
    ],
)
def test_a_sweep_that_gives_no_jobs_is_one_config_error(overrides, message):
    with pytest.raises(ConfigError) as info:
        expand(overrides)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_hydra_overrides_are_split_from_the_jobs():
    assert split_overrides(["pe=rope", "hydra.launcher.n_jobs=2", "+hydra/x=y", "seed=0,1"]) == (
        ["pe=rope", "seed=0,1"],
        ["hydra.launcher.n_jobs=2", "+hydra/x=y"],
    )
