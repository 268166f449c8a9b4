"""``posenc runs``: list the runs (or sweeps) under a results root, filtered and sorted."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from posenc.cli.common import ResultsDir, console, fail, user_errors

SHOWN = ("started", "name", "status", "model", "pe", "task", "scale", "seed", "run")  # the table's columns


def runs(
    filters: Annotated[
        list[str] | None,
        typer.Argument(help="More KEY=VALUE filters, as --where takes them.", show_default=False),
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where",
            "-w",
            help="Keep runs whose KEY is VALUE (pe=rope, status=completed, train.lr=0.001; VALUE may list "
            "several: pe=rope,alibi). Repeat it, or add more after it.",
        ),
    ] = None,
    sort: Annotated[
        str | None, typer.Option(help="Sort by this key (a column or a config key); -KEY: descending.")
    ] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table, csv or json (every column).")] = "table",
    sweeps: Annotated[bool, typer.Option("--sweeps", help="List the sweeps instead, with their jobs' ends.")] = False,
    results_dir: ResultsDir = None,
) -> None:
    """List the runs under the results root: where each is, what it ran, how it ended, its name,
    tags and commit.

    Example: posenc runs --where pe=rope status=completed --sort -started
    """
    if format not in ("table", "csv", "json"):
        raise fail(f"--format '{format}' is not one of table, csv, json")
    with user_errors():
        from posenc.engine.results import results_root
        from posenc.launch.runs import listing

        table = listing(results_root(results_dir), [*(where or []), *(filters or [])], sort, sweeps)
    if format == "csv":
        print(table.to_csv(index=False), end="")
    elif format == "json":
        print(json.dumps(table.to_dict(orient="records"), indent=2, default=str))
    else:
        _print(table, sweeps)


def _print(table, sweeps: bool) -> None:
    from rich.table import Table

    what = "sweeps" if sweeps else "runs"
    if table.empty:
        console.print(f"no {what} found", highlight=False)
        return
    columns = list(table.columns if sweeps else [c for c in SHOWN if table[c].astype(str).str.len().any()])
    columns += [c for c in table.columns if c not in columns and c not in SHOWN and not sweeps and "." in c]
    shown = Table(title=f"{len(table)} {what}", show_lines=False)
    for column in columns:
        shown.add_column(column, overflow="fold")
    for _, row in table.iterrows():  # started to the minute: the whole stamp is in --format csv|json
        shown.add_row(*(str(row[c])[:16].replace("T", " ") if c == "started" else str(row[c]) for c in columns))
    console.print(shown)
