"""``posenc suite``: the reference suite through ``posenc sweep``, then results/REPORT.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from posenc.cli.common import ConfigDir, EventBar, Overrides, ResultsDir, console, fail, user_errors
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
        list[Path] | None,
        typer.Option(
            "--report-from",
            help="Write the report from this finished suite folder; run nothing. Repeat it for a suite run "
            "across folders (a committed report's suite/ folder and the sweeps run since).",
        ),
    ] = None,
    into: Annotated[
        Path | None,
        typer.Option(
            "--into",
            help="Run the sweeps (--only) into this suite folder of an earlier run: its model cache, "
            "one report of all its sweeps. Default: a new folder.",
        ),
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

    Example: posenc suite --quick          (posenc suite --launcher submitit_slurm hydra.launcher.partition=gpu;
    sweep by sweep: posenc suite --suite standard --only order --into results/suites/DIR; a report from
    several folders: posenc suite --report-from results/suite --report-from results/suites/DIR)
    """
    from posenc.launch import suite as suites
    from posenc.reporting.reference_report import write_report

    with user_errors():
        from posenc.core.errors import UserError
        from posenc.engine.results import results_root
        from posenc.launch.sweep import Stopped, check_launcher, missing_extra, split_overrides
        from posenc.reporting.tables import check_tables

        root = results_root(results_dir)
        target = out or root
        if report_from is not None:
            if quick or name or launcher or dry_run or only or seeds or overrides or into:
                raise UserError("--report-from writes the report of a finished suite; it takes no other run option")
            report = write_report(*suites.merge(report_from), target)
            console.print(f"report: {report}", highlight=False, soft_wrap=True)
            return
        if quick and name:
            raise UserError("give --quick or --suite, not both")
        the_suite = suites.load(name or ("quick" if quick else "full"))
        if into is not None and suites.read(into)["suite"] != the_suite.name:  # the folder is read before planning
            raise UserError(f"'{into}' holds the suite '{suites.read(into)['suite']}', not '{the_suite.name}'")
        seed_list = split_list(seeds, "--seeds", int) if seeds is not None else None
        job_overrides, hydra_overrides = split_overrides(list(overrides or []))
        chosen = launcher or the_suite.launcher
        launcher_overrides = [*(the_suite.launcher_overrides if chosen == the_suite.launcher else []), *hydra_overrides]
        extra = missing_extra(chosen) if dry_run else None  # a dry run plans without the launcher's package
        if extra is None:
            check_launcher(chosen, launcher_overrides)
        planned = suites.plan(the_suite, seed_list, split_list(only, "--only") if only else None, job_overrides)
        filled: dict[str, list[str]] = {}
        for spec in the_suite.sweeps:  # --only leaves sweeps out on purpose: their tables count
            filled.setdefault(spec.table, []).append(spec.name)
        reported = check_tables(filled)  # the report can read what the suite writes (or it is not a reference suite)
    plans = suites.plan_table(planned)
    jobs = sum(p.jobs for p in plans)
    console.print(f"suite {the_suite.name}: {jobs} jobs in {len(planned)} sweeps, launcher {chosen}", highlight=False)
    if dry_run:
        for plan in plans:
            print_plan(plan)
        if extra is not None:
            console.print(
                f"launcher {chosen} is not installed here, so its settings were not checked; to run the suite: "
                f"pip install 'posenc[{extra}]'",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        return
    with user_errors():
        if into is not None:
            suite_dir = suites.extend(into, the_suite, planned)
        else:
            suite_dir = suites.create(root, the_suite, planned, chosen)
    console.print(f"suite directory: {suite_dir}", highlight=False, soft_wrap=True)
    try:
        with EventBar() as bar:  # the suite's jobs ended / planned; its messages on stdout
            shown = lambda e: _say(e) if e.kind == "message" else bar(e)  # noqa: E731
            outcome = suites.run(suite_dir, planned, chosen, launcher_overrides, on_event=shown)
    except Stopped as e:
        raise fail(str(e), code=e.exit_code) from None
    if reported:
        with user_errors():
            report = write_report(suites.collect(suite_dir), suites.read(suite_dir), target)
        done = f"report: {report}"
    else:
        done = "no reference report: the suite fills none of the tables it reads; see each sweep's runs.md"
    console.print(f"suite took {outcome.seconds:.0f} s; {done}", highlight=False, soft_wrap=True)
    if outcome.failed:
        raise fail(f"{outcome.failed} jobs did not complete; see the runs.md of each sweep in {suite_dir}", code=1)


def print_plan(plan) -> None:
    """One sweep of a dry run at the terminal's width (``posenc.launch.suite.SweepPlan``): its jobs,
    the values of each key they sweep, then the overrides every job shares, wrapped between
    overrides (one longer than a line after the commas of its value, never inside a number); jobs
    that are not every combination of the swept values get a table of what each one sweeps."""
    import re

    import pandas as pd

    from posenc.cli.common import print_frame

    width = max(console.width, 40)

    def say(label: str, words: list[str], comma: bool = False) -> None:
        pieces = []  # (text, what joins it to the piece before on one line)
        for i, word in enumerate(words):
            word += "," if comma and i < len(words) - 1 else ""
            parts = [word] if len(word) <= width - 4 else [p for p in re.split(r"(?<=,)", word) if p]
            pieces += [(part, " " if j == 0 else "") for j, part in enumerate(parts)]
        lines = [f"  {label}:"]
        for i, (text, glue) in enumerate(pieces):
            glue = " " if i == 0 else glue  # after the label
            if len(lines[-1]) + len(glue) + len(text) <= width or lines[-1] == "    ":
                lines[-1] += glue + text
            else:
                lines.append("    " + text)
        for line in lines:
            console.print(line, highlight=False, soft_wrap=True, markup=False)

    counts = " x ".join(f"{len(values)} {key}" for key, values in plan.swept.items())
    shape = f" = {counts}" if plan.product and plan.swept else ""
    console.print(f"\n{plan.sweep}: {plan.jobs} jobs{shape}", highlight=False, markup=False)
    if plan.product:
        for key, values in plan.swept.items():
            say(key, values, comma=True)
    else:
        print_frame(pd.DataFrame([{"job": i, **row} for i, row in enumerate(plan.per_job)]), ["job"])
    say("every job", plan.common)


def _say(event) -> None:
    """A suite's progress message, on stdout."""
    console.print(event.label, highlight=False, soft_wrap=True, markup=False)
