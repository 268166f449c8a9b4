"""``posenc compare``: the tables of several runs, sweeps or CSV files side by side."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from posenc.cli.common import console, user_errors


def compare(
    inputs: Annotated[
        list[Path], typer.Argument(help="Run directories, sweep directories or CSV tables.", show_default=False)
    ],
    baseline: Annotated[
        str | None,
        typer.Option(help="Rows to difference against: one of the inputs, or key=value[,key=value] (e.g. pe=nope)."),
    ] = None,
    table_name: Annotated[
        str | None,
        typer.Option(
            "--table",
            help="Which of the runs' tables (those their protocol declares: order, per_position, "
            "depth, ...). Default: each run's main table.",
        ),
    ] = None,
    metrics: Annotated[
        str | None, typer.Option(help="Comma-separated metric columns (default: every float column).")
    ] = None,
    runs: Annotated[
        bool,
        typer.Option(
            "--runs",
            help="One row per run; by default runs that differ only by seed fold into one row per "
            "configuration: mean [95% interval] over the seeds.",
        ),
    ] = False,
    out: Annotated[
        list[Path] | None,
        typer.Option("--out", "-o", help="Export the table; format by extension: .csv, .md, .tex (repeatable)."),
    ] = None,
) -> None:
    """Join the tables of runs on the config keys that differ, one row per configuration with the
    mean and 95% interval over seeds (--runs: every run), and show the differences against a
    baseline (paired by seed before they are averaged).

    Example: posenc compare results/sweeps/20250101-120000-pe-seed --baseline pe=nope -o cmp.md
    Another table: posenc compare results/order/lm results/order/vit --table order
    """
    with user_errors():
        from posenc.core.errors import UserError
        from posenc.core.text import split_list
        from posenc.reporting.compare import differences, export, load, metric_columns, per_configuration, select

        table, keys = load(inputs, table_name)
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
        measured = [c for c in shown.columns if c in chosen or str(c).startswith("Δ ")]
        if not runs and "seed" in shown.columns:
            shown = per_configuration(shown, measured)
            keys = [k for k in keys if k not in ("seed", "run")] + ["seeds"]
        for path in out or []:
            export(shown, path)
    _print(shown, keys, measured)
    for path in out or []:
        console.print(f"wrote {path}", highlight=False, soft_wrap=True)


def _cell(row, column: str) -> str:
    """A metric as ``mean [low, high]`` where the table has its interval, else the value."""
    from posenc.reporting.compare import HIGH, LOW

    v = row[column]
    if not isinstance(v, float):
        return str(v)
    text = f"{v:+.4g}" if column.startswith("Δ") else f"{v:.4g}"
    low, high = row.get(f"{column}{LOW}"), row.get(f"{column}{HIGH}")
    if low is not None and not math.isnan(low):
        text += f" [{low:.3g}, {high:.3g}]"
    if column.startswith("Δ") and not math.isnan(v) and v != 0:
        return f"[{'green' if v < 0 else 'red'}]{text}[/]"
    return text


def _print(table, keys, metrics) -> None:
    """Keys, then metrics and differences, in as many stacked tables as the terminal's width
    needs (``print_stacked``: each repeats the keys), so that no header is cut; columns equal on
    every row and the interval columns (shown inside their metric's cell) are left to the exports."""
    from rich.markup import escape

    from posenc.cli.common import print_stacked
    from posenc.reporting.compare import HIGH, LOW

    plain = [c for c in table.columns if c in metrics and not str(c).startswith("Δ ")]
    shown = [x for c in plain for x in (c, f"Δ {c}") if x in table.columns]  # each difference beside its metric
    front = [
        c
        for c in table.columns
        if c not in shown
        and c not in ("run", "seeds")
        and not str(c).endswith((LOW, HIGH))
        and (c in keys or table[c].astype(str).nunique() > 1)
    ]
    front += [c for c in ("seeds", "run") if c in table.columns]
    cells = {
        c: [_cell(row, c) if c in shown else escape(str(row[c])) for _, row in table.iterrows()] for c in front + shown
    }
    print_stacked(cells, front, shown)
