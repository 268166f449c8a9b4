"""A preempted extrapolation sweep job (SLURM's SIGUSR2, through submitit's local executor) is
requeued and resumes from its cached model and the cells it scored (``cells.jsonl``), to the
table of an uninterrupted sweep, byte for byte."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
from test_sweep import _cmdline, only, posenc

JOB = [
    "experiment=extrapolation",
    "pe=rope",
    "extrapolation.scales=[pi,ntk,yarn]",
    "extrapolation.lengths=[16,32,64,128,256,512]",
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=64",
    "train.batch_size=4",
    "train.warmup_steps=1",
    "train.seq_len=16",
    "train.steps=4",
    "train.eval_every=1000",
    "eval.max_windows=64",
    "eval.periodic_windows=2",
    "seed=0",
]


@pytest.mark.slow
def test_a_preempted_extrapolation_job_resumes_from_its_scored_cells(tmp_path):
    reference = posenc("sweep", *JOB, "--launcher", "basic", "--results-dir", str(tmp_path / "reference"))
    sweep = posenc("sweep", *JOB, "--launcher", "submitit_local", "--results-dir", str(tmp_path / "cut"))
    deadline = time.monotonic() + 300
    while not [p for p in (tmp_path / "cut").glob("sweeps/*/0/runs/*/cells.jsonl") if p.read_text().count("\n")]:
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.01)
    sweep_dir = only(tmp_path / "cut" / "sweeps")
    (task,) = [
        p
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _cmdline(p).count("submitit.core._submit") and str(sweep_dir) in _cmdline(p)
    ]
    os.kill(int(task.name), signal.SIGUSR2)  # what SLURM sends before preempting or timing out
    _, err = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, err
    assert reference.wait(timeout=600) == 0, reference.communicate()

    logs = "".join(p.read_text() for p in sweep_dir.glob(".submitit/*/*_log.*"))
    assert "Requeued job" in logs
    run = Path(pd.read_csv(sweep_dir / "runs.csv")["run_dir"].item())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["resumes"] == 1
    assert 1 <= summary["cells"]["reused"] < 24 and summary["cells"]["scored"] == 24 - summary["cells"]["reused"]
    assert all(m["reused"] for m in summary["models"])  # the requeued job trained nothing again
    (clean,) = (tmp_path / "reference").glob("sweeps/*/0/runs/*")
    for name in ("table.csv", "per_position.csv"):
        assert (run / name).read_bytes() == (clean / name).read_bytes()
