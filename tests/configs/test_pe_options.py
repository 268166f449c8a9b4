"""Every 1D position-scheme option of the config tree composes, builds, and trains two steps
(a new option is tested here with no edit: the lists are read from the tree)."""

import math

import pandas as pd
import pytest

from posenc.core.errors import ConfigError
from posenc.engine.build import build
from posenc.engine.config import compose, list_options, option_node, options_where
from posenc.engine.context import RunContext
from posenc.experiments.train import Train

TEXT = options_where("pe", lambda c: c.ndim == 1)
# every 1D scheme that takes positions: its option carries the randomized setting
TAKES_POSITIONS = [name for name in TEXT if "randomized" in option_node("pe", name)]
SMOKE = ["experiment=smoke", "train.steps=2", "eval.max_windows=2"]


def test_options_are_listed_with_a_description():
    options = list_options("pe")
    assert {"rope", "alibi", "learned"} <= set(TEXT) <= set(options)
    for name in TEXT:
        assert options[name], name


@pytest.mark.parametrize(
    "overrides",
    [[f"pe={name}"] for name in TEXT]
    + [
        [f"pe={name}", "pe.randomized=true", "pe.randomized_max=256"]
        + (["pe.max_len=256"] if name == "learned" else [])
        for name in TAKES_POSITIONS
    ],
    ids=lambda o: " ".join(o),
)
def test_option_trains_two_steps(overrides, tmp_path):
    cfg = compose(overrides + SMOKE)
    result = Train().run(cfg, RunContext(tmp_path))
    table, run_dir = result.table, result.run
    row = table.iloc[0]
    assert row["pe"] == overrides[0].split("=")[1] and row["steps"] == 2
    assert math.isfinite(row["val_loss"]) and 3.0 < row["val_loss"] < 7.0  # near ln 256 at init
    assert (run_dir.path / "checkpoint" / "model.safetensors").exists()
    assert pd.read_csv(run_dir.path / "table.csv")["pe"].tolist() == [row["pe"]]
    if "pe.randomized=true" in overrides:
        assert run_dir.read_summary()["status"] == "completed"


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["pe=xpos", "pe.layout=diagonal"], "pe.layout: 'diagonal' is not one of 'half', 'interleaved'"),
        (["pe=relative", "pe.max_distance=-1"], "pe.max_distance must be >= 0, got -1"),
        (
            ["pe=alibi", "pe.randomized=true", "pe.randomized_max=16"],
            "pe.randomized_max=16 is shorter than train.seq_len=32",
        ),
        (["pe=learned", "pe.randomized=true"], "raise pe.max_len to at least 2048"),
        (
            ["pe=t5", "pe.num_buckets=32", "pe.max_distance=8"],
            "pe.max_distance=8 must be larger than the 16 exact buckets",
        ),
    ],
)
def test_bad_values_are_config_errors(overrides, message):
    with pytest.raises(ConfigError) as e:
        build(compose(overrides + SMOKE))
    assert message in str(e.value)


def test_nope_has_no_randomized_key():
    with pytest.raises(ConfigError, match="unknown override key 'pe.randomized'"):
        compose(["pe=nope", "pe.randomized=true"])
