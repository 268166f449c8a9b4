"""``posenc report``: one Markdown report of runs and sweeps."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from posenc.cli.common import ResultsDir, console, user_errors


def report(
    inputs: Annotated[list[Path], typer.Argument(help="Run directories or sweep directories.", show_default=False)],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Folder of the report. Default: RESULTS/reports/<timestamp>.")
    ] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Write one Markdown report (tables, statistics, curves and plots) of the given runs.

    Example: posenc report results/sweeps/20250101-120000-pe-seed
    results/runs/20250101-130000-lm_tiny-rope-text-1a2b3c4d
    """
    with user_errors():
        from posenc.engine.results import results_root
        from posenc.reporting.report import write_report

        folder = out or results_root(results_dir) / "reports" / time.strftime("%Y%m%d-%H%M%S")
        path = write_report(inputs, folder)
    console.print(f"report: {path}", highlight=False, soft_wrap=True)
