"""``posenc suite``: the reference suite through ``posenc sweep``, then results/REPORT.md."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from posenc.cli.common import ConfigDir, Overrides, ResultsDir, console, fail, user_errors
from posenc.core.text import split_list


def suite(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick", help="The quick suite (configs/suite/quick.yaml): tiny models, <= 20 min on 2 CPU cores."
        ),
    ] = False,
    name: Annotated[
        str | None,
        typer.Option(
            "--suite",
            help="A suite by name (see `posenc list suite`) or a suite .yaml file. "
            "Default: full, or quick with --quick.",
        ),
    ] = None,
    seeds: Annotated[
        str | None, typer.Option(help="Comma list of seeds. Default: the suite's (standard: 0-4; quick, full: 0-2).")
    ] = None,
    only: Annotated[str | None, typer.Option(help="Comma list of the suite's sweeps to run. Default: all.")] = None,
    launcher: Annotated[
        str | None,
        typer.Option(help="Hydra launcher (basic, joblib, submitit_local, submitit_slurm). Default: the suite's."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Plan and check every job, print them, run nothing.")
    ] = False,
    report_from: Annotated[
        Path | None,
        typer.Option("--report-from", help="Write the report from this finished suite folder; run nothing."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where REPORT.md and its tables go (REPORT.md, suite/). Default: the results root."),
    ] = None,
    results_dir: ResultsDir = None,
    config_dir: ConfigDir = None,
    overrides: Overrides = None,
) -> None:
    """Run the reference suite — extrapolation (text, passkey), resolution, order, check — as
    one `posenc sweep` per experiment over the suite's seeds, then write REPORT.md: for each claim C1–C12
    of the seed document the table that tests it, with 95% intervals, beside the published
    finding it mirrors. Extra overrides go to every job; hydra.launcher.* ones to the launcher.

    Example: posenc suite --quick          (posenc suite --launcher submitit_slurm hydra.launcher.partition=gpu)
    """
    with user_errors():
        from posenc.core.errors import UserError
        from posenc.engine.results import results_root
        from posenc.launch.suite import collect, create, load, plan, plan_table, read, record
        from posenc.launch.sweep import check_launcher, split_overrides

        root = results_root(results_dir)
        target = out or root
        if report_from is not None:
            from posenc.reporting.reference_report import write_report

            if quick or name or launcher or dry_run or only or seeds or overrides:
                raise UserError("--report-from writes the report of a finished suite; it takes no other run option")
            report = write_report(collect(report_from), read(report_from), target)
            console.print(f"report: {report}", highlight=False, soft_wrap=True)
            return
        if quick and name:
            raise UserError("give --quick or --suite, not both")
        the_suite = load(name or ("quick" if quick else "full"))
        seed_list = split_list(seeds, "--seeds", int) if seeds is not None else None
        job_overrides, hydra_overrides = split_overrides(list(overrides or []))
        chosen = launcher or the_suite.launcher
        launcher_overrides = [*(the_suite.launcher_overrides if chosen == the_suite.launcher else []), *hydra_overrides]
        check_launcher(chosen, launcher_overrides)
        planned = plan(the_suite, seed_list, split_list(only, "--only") if only else None, job_overrides)
    table = plan_table(planned)
    console.print(
        f"suite {the_suite.name}: {len(table)} jobs in {len(planned)} sweeps, launcher {chosen}", highlight=False
    )
    if dry_run:
        console.print(table.to_markdown(index=False), highlight=False, soft_wrap=True, markup=False)
        return
    from posenc.cli.sweep import launch
    from posenc.launch.sweep import create as create_sweep
    from posenc.launch.sweep import write_tables

    with user_errors():
        suite_dir = create(root, the_suite, planned, chosen)
    console.print(f"suite directory: {suite_dir}", highlight=False, soft_wrap=True)
    started, failed = time.perf_counter(), 0
    for p in planned:
        t0 = time.perf_counter()
        sweep_dir = create_sweep(suite_dir, p.overrides + launcher_overrides, chosen, p.jobs)
        record(suite_dir, p.spec.name, dir=str(sweep_dir.relative_to(suite_dir)))
        console.print(
            f"{p.spec.name}: {len(p.jobs)} jobs: {p.spec.description}", highlight=False, soft_wrap=True, markup=False
        )
        code = launch(sweep_dir, chosen, p.overrides, launcher_overrides)
        runs, _ = write_tables(sweep_dir)
        failed += int((runs["status"] != "completed").sum())
        record(suite_dir, p.spec.name, seconds=time.perf_counter() - t0, launcher_exit=code)
        console.print(f"{p.spec.name}: done in {time.perf_counter() - t0:.0f} s", highlight=False)
    record(suite_dir, seconds=time.perf_counter() - started, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    from posenc.reporting.reference_report import write_report

    with user_errors():
        report = write_report(collect(suite_dir), read(suite_dir), target)
    console.print(
        f"suite took {time.perf_counter() - started:.0f} s; report: {report}", highlight=False, soft_wrap=True
    )
    if failed:
        raise fail(f"{failed} jobs did not complete; see the runs.md of each sweep in {suite_dir}", code=1)
