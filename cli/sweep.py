"""``posenc sweep``: a real Hydra multirun over every sweep syntax Hydra knows, on a local or SLURM launcher."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from posenc.cli.common import ConfigDir, EventBar, Overrides, ResultsDir, console, fail, user_errors

if TYPE_CHECKING:
    from posenc.launch.sweep import SweepOutcome


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
    """Run every combination of the sweep overrides (comma lists, glob(), range(), choice()) as one
    job each; list them with their status, and aggregate the runs that differ only by seed (mean,
    std, n, 95% interval).

    Example: posenc sweep experiment=smoke 'pe=glob(*,exclude=[*2d*])' seed=0,1,2 --launcher joblib
    """
    from posenc.launch import sweep as sweeps

    with user_errors():
        from posenc.engine.results import results_root

        planned = sweeps.plan(list(overrides or []), launcher)
        sweep_dir = sweeps.create(
            results_root(results_dir), planned.job_overrides + planned.hydra_overrides, launcher, planned.jobs
        )
    for override, why in planned.left_out.items():
        console.print(f"left out {override} (a glob matched it): {why}", highlight=False, soft_wrap=True, markup=False)
    console.print(
        f"sweep directory: {sweep_dir} ({len(planned.jobs)} jobs, launcher {launcher})", highlight=False, soft_wrap=True
    )
    try:
        with EventBar() as bar:  # jobs ended / planned
            outcome = sweeps.run(sweep_dir, planned, on_event=bar)
    except sweeps.Stopped as e:
        raise fail(str(e), code=e.exit_code) from None
    if outcome.code:
        raise fail(
            f"the launcher stopped (exit code {outcome.code}); jobs so far are listed in {sweep_dir}/runs.md", code=1
        )
    print_runs(outcome)
    if outcome.failed:
        raise fail(
            f"{outcome.failed} of {len(outcome.runs)} jobs did not complete; see {sweep_dir / 'runs.md'}", code=1
        )


def print_runs(outcome: SweepOutcome) -> None:
    """The runs table of a finished sweep, its swept columns and status, and where its tables are."""
    from rich.table import Table

    from posenc.launch.sweep import swept_columns

    runs, sweep_dir = outcome.runs, outcome.sweep_dir
    table = Table(title=f"sweep {sweep_dir.name}", show_header=True)
    columns = ["job", *swept_columns(runs, outcome.stats), "status", "error"]
    for c in columns:
        table.add_column(c)
    for _, row in runs.iterrows():
        table.add_row(*(f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns))
    console.print(table)
    console.print(f"tables: {sweep_dir / 'runs.md'}, {sweep_dir / 'stats.md'}", highlight=False, soft_wrap=True)
