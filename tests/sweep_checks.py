"""Checks shared by the sweep tests of every launcher (tests/cli, tests/cluster)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from posenc.engine.results import RunDir

TIMING = ("tokens_per_s", "elapsed_s", "seconds")


def check_resumed_like_reference(sweep_dir: Path, reference_runs: Path) -> None:
    """The sweep's one job was preempted once: submitit says so in its log, the run resumed once,
    and its metrics equal, bit for bit (timing aside), those of the uninterrupted reference run,
    the only run in ``reference_runs``."""
    logs = "".join(p.read_text() for p in sweep_dir.glob(".submitit/*/*_log.*"))
    assert "this job is preempted" in logs and "Requeued job" in logs
    run = RunDir(Path(pd.read_csv(sweep_dir / "runs.csv")["run_dir"].item()))
    assert run.read_summary()["status"] == "completed" and run.read_summary()["resumes"] == 1
    (reference,) = [p for p in reference_runs.iterdir() if p.is_dir()]
    ref = RunDir(reference)
    strip = lambda records: [{k: v for k, v in r.items() if k not in TIMING} for r in records]  # noqa: E731
    assert strip(run.read_records()) == strip(ref.read_records())
    assert run.read_summary()["per_position_loss"] == ref.read_summary()["per_position_loss"]
    assert run.read_summary()["config_hash"] == ref.read_summary()["config_hash"]
