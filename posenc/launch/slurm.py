"""SLURM for ``posenc sweep --launcher submitit_slurm``: what the cluster offers, checked before
any job is submitted, and the end of a sweep whose job SLURM ended without a result.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from posenc.core.errors import ConfigError


def nodes() -> list[dict[str, Any]]:
    """One row per (node, partition) from ``sinfo``: partition, default, cpus, mem_mb, gpus."""
    try:
        done = subprocess.run(
            ["sinfo", "--noheader", "--Node", "--format=%P|%c|%m|%G"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"cannot ask SLURM about its nodes (sinfo): {e}") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[0]
        raise ConfigError(f"cannot ask SLURM about its nodes (sinfo): {said}")
    rows = []
    for line in done.stdout.split():
        partition, cpus, mem, gres = line.split("|")
        rows.append(
            {
                "partition": partition.rstrip("*"),
                "default": partition.endswith("*"),
                "cpus": int(cpus.rstrip("+")),
                "mem_mb": int(mem.rstrip("+")),
                "gpus": gpu_count(gres),
            }
        )
    return rows


def gpu_count(gres: str) -> int:
    """GPUs in a node's ``%G`` generic resources: ``gpu:4``, ``gpu:a100:4(S:0-1)``, ``(null)``."""
    count = 0
    for item in gres.split(","):
        fields = item.split("(")[0].split(":")
        if fields[0] == "gpu" and len(fields) > 1 and fields[-1].isdigit():
            count += int(fields[-1])
    return count


def check_settings(launcher: dict[str, Any]) -> None:
    """The ``hydra.launcher`` settings fit the cluster ``sinfo`` describes: the partition exists,
    a job can get its CPUs, GPUs and memory on one node, and SLURM's checkpoint signal
    (``signal_delay_s`` before the time limit) comes after the job starts."""
    timeout_s, delay_s = launcher["timeout_min"] * 60, launcher["signal_delay_s"]
    if timeout_s <= delay_s:
        raise ConfigError(
            f"hydra.launcher.timeout_min={launcher['timeout_min']} ({timeout_s} s) must be above "
            f"hydra.launcher.signal_delay_s={delay_s} (SLURM signals a job to checkpoint that long "
            "before its time limit); raise timeout_min or lower signal_delay_s"
        )
    rows = nodes()
    valid = sorted({r["partition"] for r in rows})
    wanted = str(launcher["partition"]).split(",") if launcher.get("partition") else None
    for name in wanted or []:
        if name not in valid:
            raise ConfigError(
                f"hydra.launcher.partition: no partition '{name}' on this cluster; valid: {', '.join(valid)}"
            )
    where = [r for r in rows if (r["partition"] in wanted if wanted else r["default"])]
    if not where:
        raise ConfigError(
            f"hydra.launcher.partition is not set and this cluster has no default partition; "
            f"set it to one of: {', '.join(valid)}"
        )
    label = ",".join(wanted) if wanted else "the default partition"
    requests = (
        ("cpus_per_task", "cpus", "CPUs", 1),
        ("gpus_per_node", "gpus", "GPUs", 1),
        ("mem_gb", "mem_mb", "MB of memory", 1024),
    )
    for key, column, unit, scale in requests:
        asked = launcher.get(key)
        most = max((r[column] for r in where), default=0)
        if asked is not None and asked * scale > most:
            raise ConfigError(
                f"hydra.launcher.{key}={asked}: no node of {label} has that many; the largest has {most} {unit}"
            )


def slurm_jobs(sweep_dir: Path) -> dict[int, str]:
    """{job number: SLURM job id} of a sweep's jobs. Each job records its id when it starts
    (``job.json``); Hydra's submitit launcher submits the jobs as one array in job order, so a job
    that never started is task ``num`` of the array the others name."""
    from posenc.launch.listing import read_job, read_sweep

    jobs = range(len(read_sweep(sweep_dir)["jobs"]))
    recorded = {num: read_job(Path(sweep_dir) / str(num)).get("slurm_job") for num in jobs}
    arrays = {str(i).split("_")[0] for i in recorded.values() if i and "_" in str(i)}
    array = arrays.pop() if len(arrays) == 1 else None
    ids = {num: str(i) for num, i in recorded.items() if i}
    return {num: ids.get(num) or f"{array}_{num}" for num in jobs if num in ids or array is not None}


def settle(sweep_dir: Path) -> int:
    """Wait for every job the sweep submitted to SLURM, and mark failed, in its own folder, each
    one SLURM ended without a result; return how many. (Hydra's submitit launcher collects
    results in job order and stops at the first such job, leaving the later ones unwatched
    and the failed one listed as running.)"""
    from omegaconf import OmegaConf
    from submitit import SlurmJob

    from posenc.launch.listing import mark_failed

    # where the launcher put submitit's files: Hydra's own record of the sweep's launcher settings
    folder = OmegaConf.load(Path(sweep_dir) / "multirun.yaml").hydra.launcher.submitit_folder
    failed = 0
    for num, job_id in sorted(slurm_jobs(sweep_dir).items()):
        job = SlurmJob(folder=folder, job_id=job_id)
        job.wait()
        if job.exception() is not None:  # a job that ran returns its status: no result means SLURM ended it
            mark_failed(Path(sweep_dir) / str(num), ended_without_result(job))
            failed += 1
    return failed


def ended_without_result(job: Any) -> str:
    """One line: SLURM's state of a job that left no result, and the last line of its stderr
    (``srun: error: node: task 0: Killed``)."""
    said = [line.strip() for line in (job.stderr() or "").splitlines() if line.strip()]
    errors = [line for line in said if "error:" in line and "CANCELLED AT" not in line] or said
    return f"SLURM job {job.job_id} ended {job.state}" + (f": {errors[-1]}" if errors else "")
