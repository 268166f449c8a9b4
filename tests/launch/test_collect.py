"""posenc.launch.suite.collect on a hand-made suite folder: a side table keeps its rows that hold a
NaN and drops only the rows of jobs that did not write it; where the models were cached is no column."""

import json

import pandas as pd

from posenc.launch.suite import collect


def job(sweep, num, table, depth=None):
    run = sweep / str(num) / "runs" / "run"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("{}\n")
    (run / "summary.json").write_text(json.dumps({"status": "completed"}))
    table.to_csv(run / "table.csv", index=False)
    if depth is not None:
        depth.to_csv(run / "depth.csv", index=False)


def test_a_side_table_keeps_its_rows_with_a_nan(tmp_path):
    """Before, ``dropna()`` dropped every side-table row holding a NaN: a learned table's depth row
    (no score past its length) and, with the training record, every row of a model that missed its
    target (``target_step`` NaN), or of every model when no target was set."""
    cache = "cache_dir='/x/cache'"
    overrides = ["experiment=extrapolation", "pe=learned,rope", "seed=0", cache]
    sweep = tmp_path / "sweeps" / "s"
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text(
        json.dumps({"jobs": [["pe=learned", "seed=0", cache], ["pe=rope", "seed=0", cache]]})
    )
    (tmp_path / "suite.json").write_text(
        json.dumps({"sweeps": {"extrapolation_passkey": {"dir": "sweeps/s", "overrides": overrides}}})
    )
    scores = {"scale": ["none"], "metric": ["accuracy"], "32": [0.9], "64": [0.5]}
    learned_depth = pd.DataFrame(
        {
            "pe": ["learned"] * 2,
            "depth": [0.0, 1.0],
            "32": [0.9, 0.8],
            "64": [float("nan")] * 2,
            "reached_target": [False] * 2,
            "target_step": [float("nan")] * 2,
        }
    )
    job(sweep, 0, pd.DataFrame({"pe": ["learned"], **scores}), learned_depth)
    job(sweep, 1, pd.DataFrame({"pe": ["rope"], **scores}))  # wrote no depth table
    tables = collect(tmp_path)
    depth = tables["extrapolation_passkey_depth"]
    assert depth["pe"].tolist() == ["learned", "learned"] and depth["32"].tolist() == [0.9, 0.8]
    assert depth["64"].isna().all() and "cache_dir" not in depth and "cache_dir" not in tables["extrapolation_passkey"]


def test_two_sweeps_that_name_one_table_fill_it_together(tmp_path):
    """A sweep with ``table: extrapolation_text`` (NoPE's deeper recipe) adds its rows to that table;
    its own constant recipe override (model.n_layers=4) is no column, as in the sweep it joins."""
    scores = {"scale": ["none"], "metric": ["bpb"], "64": [2.4]}
    sweeps = {}
    for name, pes, extra in (
        ("extrapolation_text", ["rope", "alibi"], []),
        ("extrapolation_text_nope", ["nope"], ["model.n_layers=4"]),
    ):
        folder = tmp_path / "sweeps" / name
        folder.mkdir(parents=True)
        jobs = [[f"pe={pe}", *extra, "seed=0"] for pe in pes]
        (folder / "sweep.json").write_text(json.dumps({"jobs": jobs}))
        for num, pe in enumerate(pes):
            job(folder, num, pd.DataFrame({"pe": [pe], **scores}))
        sweeps[name] = {
            "dir": f"sweeps/{name}",
            "overrides": [f"pe={','.join(pes)}", *extra, "seed=0"],
            "table": "extrapolation_text",
        }
    (tmp_path / "suite.json").write_text(json.dumps({"sweeps": sweeps}))
    tables = collect(tmp_path)
    assert list(tables) == ["extrapolation_text"]
    assert tables["extrapolation_text"]["pe"].tolist() == ["rope", "alibi", "nope"]
    assert "model.n_layers" not in tables["extrapolation_text"]
