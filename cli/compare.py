"""``posenc compare``: the tables of several runs, sweeps or CSV files side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from posenc.cli.common import console, user_errors


def compare(
    inputs: Annotated[list[Path], typer.Argument(help="Run directories, sweep directories or CSV tables.",
                                                  show_default=False)],
    baseline: Annotated[str | None, typer.Option(
        help="Rows to difference against: one of the inputs, or key=value[,key=value] (e.g. pe=nope).")] = None,
    metrics: Annotated[str | None, typer.Option(help="Comma-separated metric columns (default: every float column).")] = None,
    out: Annotated[list[Path] | None, typer.Option(
        "--out", "-o", help="Export the table; format by extension: .csv, .md, .tex (repeatable).")] = None,
) -> None:
    """Join the tables of runs on the config keys that differ and show the differences against
    a baseline.

    Example: posenc compare results/sweeps/20250101-120000-pe-seed --baseline pe=nope -o cmp.md
    """
    with user_errors():
        from posenc.reporting.compare import differences, export, load, metric_columns, select
        from posenc.core.errors import UserError
        from posenc.core.text import split_list

        table, keys = load(inputs)
        available = metric_columns(table, keys)
        chosen = available if metrics is None else split_list(metrics, "--metrics")
        unknown = [m for m in chosen if m not in available]
        if unknown:
            raise UserError(f"unknown metric '{unknown[0]}'; valid: {', '.join(available)}")
        for path in out or []:
            if path.suffix not in (".csv", ".md", ".tex"):
                raise UserError(f"cannot export to '{path}': use a .csv, .md or .tex file")
        shown = table[[c for c in table.columns if c not in available or c in chosen]]
        if baseline is not None:
            shown = differences(shown, select(shown, baseline, inputs), chosen)
        for path in out or []:
            export(shown, path)
    _print(shown, keys, chosen)
    for path in out or []:
        console.print(f"wrote {path}", highlight=False, soft_wrap=True)


def _print(table, keys, metrics) -> None:
    """Keys, then metrics and differences; columns equal on every row are left to the exports."""
    from rich.table import Table

    keep = [c for c in table.columns if c in keys and c != "run" or c in metrics or str(c).startswith("Δ")
            or c != "run" and table[c].astype(str).nunique() > 1]
    table = table[keep + ["run"]]

    view = Table(show_header=True, header_style="bold")
    for c in table.columns:
        view.add_column(str(c), justify="left" if c in keys else "right")
    for row in table.itertuples(index=False):
        cells = []
        for c, v in zip(table.columns, row):
            text = f"{v:+.4g}" if str(c).startswith("Δ") and isinstance(v, float) else (
                f"{v:.4g}" if isinstance(v, float) else str(v))
            cells.append(f"[green]{text}[/]" if str(c).startswith("Δ") and isinstance(v, float) and v < 0 else
                         f"[red]{text}[/]" if str(c).startswith("Δ") and isinstance(v, float) and v > 0 else text)
        view.add_row(*cells)
    console.print(view)
