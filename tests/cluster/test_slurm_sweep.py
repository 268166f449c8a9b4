"""`posenc sweep --launcher submitit_slurm` on a real SLURM cluster (tests/cluster/slurm.sh): a
sweep equals the same sweep run in-process, a preempted job requeues and resumes to the
uninterrupted metrics, a killed job is listed as failed while the others complete, the array
parallelism limit holds, and a partition that does not exist submits nothing.

Start the cluster with `tests/cluster/slurm.sh up`, or let the fixture do it (POSENC_SLURM=1).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from sweep_checks import TIMING, check_resumed_like_reference

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TINY = ["experiment=smoke", "train.steps=3", "train.log_every=1", "eval.max_windows=2", "eval.periodic_windows=2"]
# what a job on the one-node test cluster can get: no GPU, one CPU, no memory request; and a time
# limit above 10 min, under which submitit takes every USR2 for a time-out, never a preemption
SMALL = [
    "--launcher",
    "submitit_slurm",
    "hydra.launcher.gpus_per_node=null",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=null",
    "hydra.launcher.timeout_min=30",
    "hydra.launcher.signal_delay_s=30",
]


def posenc(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "posenc", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def only(folder: Path) -> Path:
    (entry,) = [p for p in folder.iterdir() if p.is_dir()]
    return entry


def slurm_jobs(sweep_dir: Path) -> list[str]:
    """The SLURM ids (``<array>_<task>``; one job alone is no array: "17") of the sweep's jobs, in
    job order, as the sweep records them (each job writes its id into its job.json)."""
    from posenc.launch.slurm import slurm_jobs as recorded

    return [job for _, job in sorted(recorded(sweep_dir).items())]


def wait_for(pattern: str, root: Path, sweep: subprocess.Popen, seconds: float = 300) -> Path:
    deadline = time.monotonic() + seconds
    while not (found := list(root.glob(pattern))):
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.1)
    return found[0]


def sacct(env: dict[str, str], array: str) -> pd.DataFrame:
    """The array's jobs once SLURM has ended them all (a job's result can come before its end)."""
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(
            ["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", array, "--format=JobID,State,Start,End"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        jobs = pd.DataFrame(
            [line.split("|") for line in out.stdout.splitlines()], columns=["job", "state", "start", "end"]
        )
        if (
            not jobs["state"].isin(["PENDING", "RUNNING", "COMPLETING", "REQUEUED"]).any()
            or time.monotonic() > deadline
        ):
            return jobs
        time.sleep(1)


def untimed(table: pd.DataFrame) -> pd.DataFrame:
    """A runs or stats table without its timing columns or rows, and without run directories."""
    if "metric" in table:
        table = table[~table["metric"].isin(TIMING)].reset_index(drop=True)
    assert "val_loss" in table.columns or "val_loss" in table.get("metric", []).tolist()
    return table.drop(columns=[c for c in table.columns if c in TIMING or c == "run_dir"])


def test_a_sweep_on_slurm_lists_the_same_runs_and_statistics_as_the_basic_launcher(slurm, tmp_path):
    """Also, the array parallelism limit holds: one-CPU jobs fit the two-CPU node two at a time,
    and with array_parallelism=1 they run one after the other."""
    on_slurm = posenc(
        slurm,
        "sweep",
        *TINY,
        "pe=rope,nope",
        "seed=0,1",
        *SMALL,
        "hydra.launcher.array_parallelism=1",
        "--results-dir",
        str(tmp_path / "slurm"),
    )
    basic = posenc(slurm, "sweep", *TINY, "pe=rope,nope", "seed=0,1", "--results-dir", str(tmp_path / "basic"))
    _, err = on_slurm.communicate(timeout=600)
    assert on_slurm.returncode == 0, err
    assert basic.wait(timeout=600) == 0
    sweep_dir, reference = only(tmp_path / "slurm" / "sweeps"), only(tmp_path / "basic" / "sweeps")
    for name in ("runs", "stats"):
        table, expected = (untimed(pd.read_csv(d / f"{name}.csv")) for d in (sweep_dir, reference))
        pd.testing.assert_frame_equal(table, expected, check_exact=True)
    assert pd.read_csv(sweep_dir / "runs.csv")["status"].tolist() == ["completed"] * 4

    jobs = slurm_jobs(sweep_dir)
    array = jobs[0].split("_")[0]
    assert jobs == [f"{array}_{task}" for task in range(4)]  # one array of four
    assert "#SBATCH --array=0-3%1" in (sweep_dir / ".submitit" / array / f"{array}_submission.sh").read_text()
    ran = sacct(slurm, array)
    assert ran["state"].tolist() == ["COMPLETED"] * 4
    ran = ran.sort_values("start").reset_index(drop=True)  # ISO times: text order is time order
    assert (ran["end"].iloc[:-1].to_numpy() <= ran["start"].iloc[1:].to_numpy()).all(), ran  # never two at once


def test_a_job_preempted_with_usr2_checkpoints_requeues_and_resumes_to_the_uninterrupted_metrics(slurm, tmp_path):
    args = [
        "experiment=smoke",
        "train.steps=40",
        "train.checkpoint_every=3",
        "train.eval_every=4",
        "train.log_every=2",
        "eval.max_windows=4",
        "eval.periodic_windows=4",
    ]
    reference = posenc(slurm, "train", "-q", *args, "--results-dir", str(tmp_path / "reference"))
    sweep = posenc(slurm, "sweep", *args, "seed=0", *SMALL, "--results-dir", str(tmp_path / "slurm"))
    wait_for("sweeps/*/0/runs/*/checkpoint/trainer.pt", tmp_path / "slurm", sweep)
    sweep_dir = only(tmp_path / "slurm" / "sweeps")
    (job,) = slurm_jobs(sweep_dir)
    # what SLURM sends signal_delay_s before a time limit, and what a preempting admin sends
    subprocess.run(["scancel", "--signal=USR2", job], env=slurm, check=True)
    _, err = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, err
    assert reference.wait(timeout=300) == 0

    check_resumed_like_reference(sweep_dir, tmp_path / "reference" / "runs")


def test_a_job_killed_with_sigkill_is_listed_failed_and_the_others_complete(slurm, tmp_path):
    """Before posenc settled the array itself, Hydra's launcher stopped at the killed job: the
    sweep ended with 'the launcher stopped' and the job stayed 'running' in runs.csv."""
    sweep = posenc(slurm, "sweep", *TINY[:1], "train.steps=3,100000", *TINY[2:], *SMALL, "--results-dir", str(tmp_path))
    wait_for("sweeps/*/1/runs/*/metrics.jsonl", tmp_path, sweep)
    sweep_dir = only(tmp_path / "sweeps")
    killed = slurm_jobs(sweep_dir)[1]
    subprocess.run(["scancel", "--signal=KILL", killed], env=slurm, check=True)
    _, err = sweep.communicate(timeout=600)

    assert sweep.returncode == 1
    assert err.strip().splitlines()[-1] == f"error: 1 of 2 jobs did not complete; see {sweep_dir / 'runs.md'}"
    runs = pd.read_csv(sweep_dir / "runs.csv", keep_default_na=False)
    assert runs["status"].tolist() == ["completed", "failed"]
    assert runs["error"][0] == ""
    assert (
        runs["error"][1] == f"SLURM job {killed} ended CANCELLED by {os.getuid()}: "
        f"srun: error: {socket.gethostname().split('.')[0]}: task 0: Killed"
    )
    stats = pd.read_csv(sweep_dir / "stats.csv")
    assert stats.loc[stats["metric"] == "val_loss", ["train.steps", "n", "failed"]].values.tolist() == [
        [3, 1, 0],
        [100000, 0, 1],
    ]


def test_a_partition_that_does_not_exist_is_one_line_and_submits_nothing(slurm, tmp_path):
    before = subprocess.run(["squeue", "--noheader"], env=slurm, capture_output=True, text=True, check=True).stdout
    sweep = posenc(
        slurm, "sweep", *TINY, "pe=rope,nope", *SMALL, "hydra.launcher.partition=nosuch", "--results-dir", str(tmp_path)
    )
    out, err = sweep.communicate(timeout=300)
    assert sweep.returncode == 2
    partitions = subprocess.run(
        ["sinfo", "--noheader", "--format=%R"], env=slurm, capture_output=True, text=True, check=True
    ).stdout.split()
    assert (out + err).strip().splitlines() == [
        f"error: hydra.launcher.partition: no partition 'nosuch' on this cluster; "
        f"valid: {', '.join(sorted(partitions))}"
    ]
    assert not tmp_path.joinpath("sweeps").exists()
    assert subprocess.run(["squeue", "--noheader"], env=slurm, capture_output=True, text=True).stdout == before
