"""`posenc runs`: a folder of made runs (loose ones, a sweep's, a multi-scheme one, a cache entry
that is not a run) listed, filtered with --where, sorted, as a table, CSV and JSON; an unknown key
is one line listing the keys seen."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from posenc.cli.app import app
from posenc.core.io import write_json
from posenc.engine.context import RunContext
from posenc.engine.results import RunDir

runner = CliRunner()


def config(pe, seed, lr=1e-3, model="lm_tiny"):
    return {"choices": {"model": model, "pe": pe, "task": "text", "scale": "none"}, "seed": seed, "train": {"lr": lr}}


def made(root, name, cfg, fail=False, tags=()):
    ctx = RunContext(root, config={"name": name, "tags": list(tags)})
    try:
        with ctx.running("train", cfg) as run:
            if fail:
                raise ValueError("diverged")
    except ValueError:
        pass
    return run.path


@pytest.fixture
def root(tmp_path):
    made(tmp_path, "a", config("rope", 0), tags=["long"])
    made(tmp_path, "b", config("alibi", 1, lr=3e-3))
    made(tmp_path, "c", config("rope", 2), fail=True)
    sweep = tmp_path / "sweeps" / "20261202-000000-pe"
    write_json(sweep / "sweep.json", {"created": "2026-12-02T00:00:00", "launcher": "basic", "jobs": [["pe=nope"]]})
    write_json(sweep / "0" / "job.json", {"job": 0, "overrides": ["pe=nope"]})
    made(sweep / "0", None, config("nope", 0))
    cells = {"cells": [config("rope", 0), config("yarn_rope", 0), config("rope", 0)]}
    cells["cells"][1]["choices"]["scale"] = "yarn"
    made(tmp_path, "x", cells)
    RunDir.create(tmp_path / "cache", "entry", config("rope", 9))  # a trained model, not a run
    return tmp_path


def listed(root, *args):
    result = runner.invoke(app, ["runs", "--results-dir", str(root), "--format", "csv", *args])
    assert result.exit_code == 0, result.output
    return pd.read_csv(io.StringIO(result.output), keep_default_na=False)


def test_every_run_is_listed_with_what_it_ran_and_how_it_ended(root):
    table = listed(root)
    assert len(table) == 5 and not table.run.str.startswith("cache").any()
    by_name = table.set_index("name")
    assert by_name.loc["a", "status"] == "completed" and by_name.loc["a", "tags"] == "long"
    assert by_name.loc["c", "status"] == "failed" and by_name.loc["c", "error"] == "ValueError: diverged"
    assert by_name.loc["x", "pe"] == "rope,yarn_rope" and by_name.loc["x", "scale"] == "none,yarn"
    (swept,) = table[table.sweep != ""].itertuples()
    assert swept.sweep == "sweeps/20261202-000000-pe" and swept.job == "0" and swept.pe == "nope"
    assert list(table.started) == sorted(table.started)  # by when they started
    assert (root / table.run[0] / "summary.json").is_file()  # paths are relative to the root


def test_where_filters_on_columns_and_config_keys(root):
    assert list(listed(root, "--where", "pe=rope", "status=completed").name) == ["a"]
    assert sorted(listed(root, "-w", "pe=rope,alibi").name) == ["a", "b", "c"]
    assert list(listed(root, "--where", "train.lr=0.003").name) == ["b"]
    assert listed(root, "--where", "pe=t5").empty


def test_sort_by_a_column_descending_and_by_a_config_key(root):
    table = listed(root, "--where", "model=lm_tiny", "--sort", "-seed")
    assert list(table.seed) == [2, 1, 0, 0, 0] and list(table.name[:2]) == ["c", "b"]
    assert list(listed(root, "--where", "pe=rope,alibi", "--sort", "-train.lr").name) == ["b", "a", "c"]


def test_json_and_table_formats(root):
    result = runner.invoke(app, ["runs", "--results-dir", str(root), "--format", "json", "--where", "name=b"])
    (row,) = json.loads(result.output)
    assert row["pe"] == "alibi" and row["seed"] == "1" and len(row["commit"]) == 10
    shown = runner.invoke(app, ["runs", "--results-dir", str(root), "--where", "name=a"], env={"COLUMNS": "120"})
    assert shown.exit_code == 0 and "1 runs" in shown.output and "rope" in shown.output


def test_sweeps_are_listed_with_their_jobs_ends(root):
    result = runner.invoke(app, ["runs", "--results-dir", str(root), "--sweeps", "--format", "csv"])
    (row,) = pd.read_csv(io.StringIO(result.output)).itertuples()
    assert (row.sweep, row.jobs, row.completed, row.failed) == ("sweeps/20261202-000000-pe", 1, 1, 0)
    assert row.launcher == "basic"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--where", "scheme=rope"],
            "error: unknown key 'scheme'; keys seen: run, sweep, job, name, status, model, pe, task, scale, "
            "experiment, seed, tags, started, commit, dirty, error, or a key of a run's config such as train.lr",
        ),
        (["--where", "rope"], "error: --where takes KEY=VALUE (e.g. pe=rope), got 'rope'"),
        (["--format", "xml"], "error: --format 'xml' is not one of table, csv, json"),
    ],
)
def test_bad_input_is_one_line(root, args, message):
    result = runner.invoke(app, ["runs", "--results-dir", str(root), *args], env={"COLUMNS": "400"})
    assert result.exit_code == 2 and result.output.strip() == message
