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
    (sweep / "sweep.json").write_text(json.dumps({"jobs": [["pe=learned", "seed=0", cache], ["pe=rope", "seed=0", cache]]}))
    (tmp_path / "suite.json").write_text(json.dumps({"sweeps": {"extrapolation_passkey": {
        "dir": "sweeps/s", "overrides": overrides}}}))
    scores = {"scale": ["none"], "metric": ["accuracy"], "32": [0.9], "64": [0.5]}
    learned_depth = pd.DataFrame({"pe": ["learned"] * 2, "depth": [0.0, 1.0], "32": [0.9, 0.8], "64": [float("nan")] * 2,
                                  "reached_target": [False] * 2, "target_step": [float("nan")] * 2})
    job(sweep, 0, pd.DataFrame({"pe": ["learned"], **scores}), learned_depth)
    job(sweep, 1, pd.DataFrame({"pe": ["rope"], **scores}))  # wrote no depth table
    tables = collect(tmp_path)
    depth = tables["extrapolation_passkey_depth"]
    assert depth["pe"].tolist() == ["learned", "learned"] and depth["32"].tolist() == [0.9, 0.8]
    assert depth["64"].isna().all() and "cache_dir" not in depth and "cache_dir" not in tables["extrapolation_passkey"]
