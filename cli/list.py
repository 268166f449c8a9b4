"""``posenc list``: the options of every config group, read from the config tree."""

from __future__ import annotations

from typing import Annotated

import typer

from posenc.cli.common import ConfigDir, console, user_errors


def list_(
    group: Annotated[
        str | None, typer.Argument(help="One group (model, pe, task, train, eval, scale, experiment) or suite.")
    ] = None,
    config_dir: ConfigDir = None,
) -> None:
    """List every option of every config group with its description (with --config-dir, yours too)."""
    from rich.table import Table

    from posenc.engine.config import GROUPS, list_options

    with user_errors():
        groups = [group] if group else list(GROUPS)
        table = Table(show_header=True, header_style="bold")
        for column in ("group", "option", "description"):
            table.add_column(column)
        for g in groups:
            for name, description in list_options(g).items():
                table.add_row(g, name, description)
    console.print(table)
