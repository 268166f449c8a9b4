"""``posenc sweep``: a real Hydra multirun over comma lists, on a local or SLURM launcher."""

from __future__ import annotations

import logging
import signal
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from posenc.cli.common import ConfigDir, Overrides, ResultsDir, console, fail, user_errors

# posenc.launch.sweep.SCHEMA_WARNING, here too because a submitit job imports this module (not
# posenc.launch.sweep, which start-up would pay for) before Hydra loads the launcher config again
warnings.filterwarnings("ignore", message=r"(?s).*is validated against ConfigStore schema", category=UserWarning)


def _job(cfg: Any) -> dict[str, Any]:
    """What every launcher runs, here or in a submitit job (pickled by reference)."""
    from posenc.launch.sweep import run_job

    return run_job(cfg)


def sweep(
    overrides: Overrides = None,
    launcher: Annotated[
        str,
        typer.Option(
            help="Hydra launcher: basic (one after another), joblib (local processes), "
            "submitit_local, submitit_slurm (settings in configs/hydra/launcher/)."
        ),
    ] = "basic",
    results_dir: ResultsDir = None,
    config_dir: ConfigDir = None,
) -> None:
    """Run every combination of comma-separated overrides as one job each; list them with their
    status, and aggregate the runs that differ only by seed (mean, std, n, 95% interval).

    Example: posenc sweep experiment=smoke pe=rope,nope seed=0,1,2 --launcher joblib
    """
    with user_errors():
        from posenc.engine.results import results_root
        from posenc.launch.sweep import check_jobs, check_launcher, create, expand, split_overrides

        job_overrides, hydra_overrides = split_overrides(list(overrides or []))
        check_launcher(launcher, hydra_overrides)
        jobs = expand(job_overrides)
        check_jobs(jobs)
        sweep_dir = create(results_root(results_dir), job_overrides + hydra_overrides, launcher, jobs)
    console.print(
        f"sweep directory: {sweep_dir} ({len(jobs)} jobs, launcher {launcher})", highlight=False, soft_wrap=True
    )
    code = launch(sweep_dir, launcher, job_overrides, hydra_overrides)
    if code and launcher == "submitit_slurm":
        from posenc.launch.slurm import settle

        if settle(sweep_dir):  # SLURM ended a job without a result (killed): it is listed as failed
            code = 0
    if code:
        raise fail(f"the launcher stopped (exit code {code}); jobs so far are listed in {sweep_dir}/runs.md", code=1)
    finish(sweep_dir)


def launch(sweep_dir: Path, launcher: str, job_overrides: list[str], hydra_overrides: list[str]) -> int:
    """Hand the sweep to Hydra's ``@hydra.main`` as if from its own command line."""
    import hydra

    from posenc.engine.config import searchpath_overrides
    from posenc.engine.signals import sigterm_unwinds
    from posenc.launch.sweep import quiet_schema_matching

    entry = hydra.main(config_path="pkg://posenc.configs", config_name="config", version_base="1.3")(_job)
    argv = [
        sys.argv[0],
        "--multirun",
        f"hydra/launcher={launcher}",
        f"hydra.sweep.dir={sweep_dir}",
        *searchpath_overrides(),
        *hydra_overrides,
        *job_overrides,
    ]
    saved, sys.argv = sys.argv, argv
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with quiet_schema_matching(), sigterm_unwinds():
            entry()
    except SystemExit as e:  # Hydra reports its own errors, then exits
        return int(e.code or 0)
    except KeyboardInterrupt as e:  # the launcher has stopped its workers
        name = str(e) if str(e) in ("SIGTERM", "SIGINT") else "SIGINT"
        raise fail(
            f"stopped by {name}: the launcher's workers are stopped; the jobs so far are in {sweep_dir}",
            code=128 + signal.Signals[name],
        ) from None
    finally:
        sys.argv = saved
        root.handlers[:], root.level = handlers, level  # Hydra configured logging for its jobs
    return 0


def finish(sweep_dir: Path) -> None:
    """Write and print the runs and statistics tables; exit 1 when a job failed."""
    from rich.table import Table

    from posenc.launch.sweep import write_tables

    runs, stats = write_tables(sweep_dir)
    table = Table(title=f"sweep {sweep_dir.name}", show_header=True)
    swept = [
        c for c in runs.columns if c not in ("job", "status", "error") and c in stats.columns and runs[c].nunique() > 1
    ] + (["seed"] if "seed" in runs and runs["seed"].nunique() > 1 else [])
    columns = ["job", *swept, "status", "error"]
    for c in columns:
        table.add_column(c)
    for _, row in runs.iterrows():
        table.add_row(*(f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns))
    console.print(table)
    console.print(f"tables: {sweep_dir / 'runs.md'}, {sweep_dir / 'stats.md'}", highlight=False, soft_wrap=True)
    failed = int((runs["status"] != "completed").sum())
    if failed:
        raise fail(f"{failed} of {len(runs)} jobs did not complete; see {sweep_dir / 'runs.md'}", code=1)
