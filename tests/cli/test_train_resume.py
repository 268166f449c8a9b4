"""`posenc train --resume`: a run killed at a random moment ends with the metrics of an
uninterrupted run, bit for bit on CPU (timing fields aside)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from posenc.engine.results import RunDir

ROOT = Path(__file__).resolve().parents[2]
# 200 steps (long enough that a kill within a second of the first checkpoint lands mid-run, even on
# an idle machine) with a checkpoint every 3 and a validation every 4: checkpoints fall between validations.
ARGS = [
    "experiment=smoke",
    "train.steps=200",
    "train.checkpoint_every=3",
    "train.eval_every=4",
    "train.log_every=2",
    "eval.max_windows=4",
    "eval.periodic_windows=4",
]
TIMING = ("tokens_per_s", "elapsed_s", "seconds")


def posenc(*args: str, results: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POSENC_RESULTS": str(results)}
    return subprocess.Popen(
        [sys.executable, "-m", "posenc", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def only_run(root: Path) -> Path:
    (run,) = (root / "runs").iterdir()
    return run


def wait_for_checkpoint(root: Path, proc: subprocess.Popen) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = list((root / "runs").glob("*")) if (root / "runs").exists() else []
        if runs and (runs[0] / "checkpoint" / "trainer.pt").exists():
            return runs[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError("no checkpoint within 60 s")


def metrics(run: Path) -> tuple[list[dict], dict]:
    """Every logged record and the result row, without the fields that measure time."""
    records = [{k: v for k, v in r.items() if k not in TIMING} for r in RunDir(run).read_records()]
    row = {
        k: None if pd.isna(v) else v  # empty cells (no target for text) compare equal
        for k, v in pd.read_csv(run / "table.csv").iloc[0].items()
        if k not in TIMING
    }
    row["per_position_loss"] = json.loads((run / "summary.json").read_text())["per_position_loss"]
    return records, row


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reference")
    code, err = finish(posenc("train", "-q", *ARGS, results=root))
    assert code == 0, err
    return only_run(root)


@pytest.fixture(scope="module")
def reference(reference_run) -> tuple[list[dict], dict]:
    return metrics(reference_run)


@pytest.mark.slow  # three to four fresh processes (torch import each)
def test_sigkill_at_a_random_moment_then_resume_gives_identical_metrics(tmp_path, reference):
    proc = posenc("train", "-q", *ARGS, results=tmp_path)
    run = wait_for_checkpoint(tmp_path, proc)
    time.sleep(random.uniform(0.0, 0.8))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before the kill: nothing was tested"
    assert json.loads((run / "summary.json").read_text())["status"] == "running"  # a marked partial

    code, err = finish(posenc("train", "-q", "--resume", str(run), results=tmp_path))
    assert code == 0, err
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run.name]  # no second run dir
    records, row = metrics(run)
    assert records == reference[0]
    assert row == reference[1]
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"


@pytest.mark.slow  # three to four fresh processes (torch import each)
def test_sigterm_saves_a_checkpoint_at_the_step_then_resume_gives_identical_metrics(tmp_path, reference):
    proc = posenc("train", "-q", *ARGS, results=tmp_path)
    run = wait_for_checkpoint(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)
    assert code == 128 + signal.SIGTERM
    assert len(err.strip().splitlines()) == 1 and "stopped by SIGTERM" in err and str(run) in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    import torch

    step = torch.load(run / "checkpoint" / "trainer.pt", weights_only=True)["step"]
    assert f"checkpoint of step {step} saved" in err
    assert max(r["step"] for r in RunDir(run).read_records()) <= step

    # the same overrides again are accepted (same config); the run continues where it stopped
    code, err = finish(posenc("train", "-q", "--resume", str(run), *ARGS, results=tmp_path))
    assert code == 0, err
    assert metrics(run) == reference


@pytest.mark.slow  # three to four fresh processes (torch import each)
def test_resume_refuses_another_config_and_a_missing_dir(tmp_path, reference_run):
    run = reference_run
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir()}
    code, err = finish(posenc("train", "-q", "--resume", str(run), *ARGS, "train.lr=1e-3", "seed=3", results=tmp_path))
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: cannot resume '{run}': it holds another config (differs in seed, train.lr)"
    ]
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before

    code, err = finish(posenc("train", "--resume", str(tmp_path / "nope"), results=tmp_path))
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: '{tmp_path / 'nope'}' is not a run directory (no config.yaml and summary.json)"
    ]
