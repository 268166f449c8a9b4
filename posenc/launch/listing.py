"""A sweep folder's record and its listing: which run each job made, and the tables over the jobs.

``sweep.json`` (written when the sweep is created) holds the planned jobs in Hydra's order; each
job's folder ``<num>/`` holds ``job.json`` (written by the job: its number, overrides, the tables
its protocol declares and, on SLURM, its job id), its run under ``runs/``, or ``error.json`` when
it failed before its protocol opened a run folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from posenc.analysis.stats import aggregate
from posenc.core.errors import UserError
from posenc.core.io import write_json, write_table
from posenc.engine.results import RunDir

SWEEP_FILE = "sweep.json"
JOB_FILE = "job.json"
ERROR_FILE = "error.json"


def read_job(job_dir: Path) -> dict[str, Any]:
    """What a job recorded of itself in ``job.json`` (empty before it started)."""
    path = Path(job_dir) / JOB_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def record_job(job_dir: Path, **fields: Any) -> None:
    """Update the job's ``job.json``."""
    write_json(Path(job_dir) / JOB_FILE, {**read_job(job_dir), **fields})


def mark_failed(job_dir: Path, error: str) -> None:
    """Record a job's failure once: in its run's summary unless the run is already marked failed,
    or in ``error.json`` when it failed before its protocol made a run folder."""
    run = job_run(job_dir)
    if run is None:
        write_json(Path(job_dir) / ERROR_FILE, {"status": "failed", "error": error, "run_dir": ""})
    elif RunDir(run).read_summary().get("status") != "failed":
        RunDir(run).update_summary(status="failed", error=error)


def job_run(job_dir: Path) -> Path | None:
    """The run directory of a job (None before the protocol made one)."""
    recorded = read_job(job_dir).get("run_dir")
    if recorded and (Path(recorded) / "config.yaml").is_file():
        return Path(recorded)
    runs = sorted((Path(job_dir) / "runs").glob("*/config.yaml"))
    return runs[-1].parent if runs else None


def read_sweep(sweep_dir: Path) -> dict[str, Any]:
    path = Path(sweep_dir) / SWEEP_FILE
    if not path.is_file():
        raise UserError(f"'{sweep_dir}' is not a sweep directory (no {SWEEP_FILE})")
    return json.loads(path.read_text())


def _override_columns(job: Sequence[str]) -> dict[str, str]:
    return {o.lstrip("+~").split("=", 1)[0]: o.split("=", 1)[1] if "=" in o else "" for o in job}


def runs_table(sweep_dir: Path) -> pd.DataFrame:
    """One row per planned job: its overrides, status, error line, run directory and, for a
    completed run with a one-row table, that row's float columns (its scores)."""
    sweep = read_sweep(sweep_dir)
    rows = []
    for num, job in enumerate(sweep["jobs"]):
        job_dir = Path(sweep_dir) / str(num)
        run = job_run(job_dir)
        row: dict[str, Any] = {"job": num, **_override_columns(job), "status": "pending", "error": ""}
        if run is not None:
            summary = RunDir(run).read_summary()
            error = (summary.get("error") or "").strip().splitlines()
            row.update(status=summary.get("status", "running"), error=error[0] if error else "")
            row["run_dir"] = str(run)
            table_path = run_table(run, job_dir=job_dir)
            if row["status"] == "completed" and table_path.exists():
                table = pd.read_csv(table_path)
                if len(table) == 1:
                    row.update({k: v for k, v in table.iloc[0].items() if isinstance(v, float) and k not in row})
        elif (job_dir / ERROR_FILE).exists():
            row.update(status="failed", error=json.loads((job_dir / ERROR_FILE).read_text())["error"])
        elif job_dir.exists():
            row["status"] = "running"
        rows.append(row)
    return pd.DataFrame(rows)


def run_table(run: Path, name: str | None = None, job_dir: Path | None = None) -> Path:
    """A run's table ``name``.csv; by default its protocol's main table (``main_table``), which
    its sweep job recorded in ``job.json``, else the one the run's summary names (``ctx.write``)."""
    if name is None:
        recorded = read_job(job_dir).get("table") if job_dir is not None else None
        name = recorded or RunDir(run).read_summary().get("table", "table")
    return Path(run) / f"{name}.csv"


def long_table(sweep_dir: Path, name: str | None = None) -> pd.DataFrame:
    """Every row of every job's table (its main table, or the table ``name`` such as
    ``similarity``), failed and unfinished jobs as one row without scores, with the job's
    override columns and status in front."""
    sweep = read_sweep(sweep_dir)
    parts = []
    for num, job in enumerate(sweep["jobs"]):
        job_dir = Path(sweep_dir) / str(num)
        run = job_run(job_dir)
        front = {"job": num, **_override_columns(job)}
        status = RunDir(run).read_summary().get("status") if run is not None else "pending"
        table_path = run_table(run, name, job_dir) if run is not None else None
        if status == "completed" and table_path is not None and table_path.exists():
            table = pd.read_csv(table_path)
            table = table.drop(columns=[c for c in front if c in table.columns])
            parts.append(pd.concat([pd.DataFrame([front] * len(table)), table], axis=1).assign(status=status))
        else:
            parts.append(pd.DataFrame([{**front, "status": status}]))
    return pd.concat(parts, ignore_index=True)


def stats_table(sweep_dir: Path) -> pd.DataFrame:
    """Jobs that differ only by ``seed``: n, mean, std and 95% t interval of every float column."""
    sweep = read_sweep(sweep_dir)
    table = long_table(sweep_dir)
    override_keys = list(_override_columns(sweep["jobs"][0]) if sweep["jobs"] else {})
    # float scores and pass/fail flags (a flag's mean is the fraction of seeds where it holds)
    metrics = [
        c
        for c in table.columns
        if c not in override_keys
        and c not in ("job", "status")
        and c != "seed"
        and (pd.api.types.is_float_dtype(table[c]) or pd.api.types.is_bool_dtype(table[c]))
    ]
    # table columns that tell one run's rows apart (a length, a scaling method) are kept as keys
    identity = [
        c
        for c in table.columns
        if c not in override_keys
        and c not in metrics
        and c not in ("job", "status", "seed")
        and (table.groupby("job")[c].nunique() > 1).any()
    ]
    # a table's own key column named like an output column of ``aggregate`` (the extrapolation
    # table's ``metric``: bpb or ppl) is renamed, so that both stay readable
    taken = ("metric", "n", "mean", "std", "ci95_low", "ci95_high", "failed")
    renamed = {c: "measure" if c == "metric" else f"row_{c}" for c in identity if c in taken}
    keys = [k for k in override_keys if k != "seed"] + [renamed.get(c, c) for c in identity]
    return aggregate(table.rename(columns=renamed), keys, metrics)


def write_tables(sweep_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write ``runs.{csv,md}`` and ``stats.{csv,md}`` into the sweep folder and return them."""
    runs, stats = runs_table(sweep_dir), stats_table(sweep_dir)
    write_table(runs, Path(sweep_dir), "runs")
    write_table(stats, Path(sweep_dir), "stats")
    return runs, stats
