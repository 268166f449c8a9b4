"""Options and helpers shared by every command: overrides, errors, progress, tables."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)

ResultsDir = Annotated[
    Path | None,
    typer.Option("--results-dir", help="Results root (runs go to ROOT/runs/). Default: $POSENC_RESULTS or ./results."),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar; print only the final table.")]
Seed = Annotated[int | None, typer.Option(help="Random seed (the `seed` key).")]
Steps = Annotated[int | None, typer.Option(help="Training steps (the `train.steps` key).")]


def _use_config_dir(folder: Path | None) -> Path | None:
    """Name the folder to the config layer (and to sweep jobs in other processes) by its variable."""
    from posenc.engine.config import CONFIG_DIR_ENV

    if folder is not None:
        os.environ[CONFIG_DIR_ENV] = str(folder.resolve())
    return folder


ConfigDir = Annotated[
    Path | None,
    typer.Option(
        "--config-dir",
        exists=True,
        file_okay=False,
        callback=_use_config_dir,
        help="Your own config folder (DIR/pe/NAME.yaml, ...; its Python modules import). Default: $POSENC_CONFIG_DIR.",
    ),
]
Overrides = Annotated[
    list[str] | None,
    typer.Argument(help="Hydra overrides, e.g. model.n_layers=4 train.lr=1e-3 task.path=my.txt", show_default=False),
]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one line to stderr and return the Exit to raise."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a user mistake into one line and exit code 2, a diverged run into exit code 1, a
    stop signal (after its checkpoint) into exit code 128 + the signal number."""
    from posenc.core.errors import Interrupted, TrainingDiverged, UserError

    try:
        yield
    except UserError as e:
        raise fail(str(e)) from None
    except TrainingDiverged as e:
        raise fail(f"run failed: {e}", code=1) from None
    except Interrupted as e:
        raise fail(f"interrupted: {e}", code=e.exit_code) from None


def overrides_from(options: dict[str, Any], extra: list[str] | None) -> list[str]:
    """Hydra overrides for the CLI options that were given, followed by the user's own."""
    return [f"{key}={value}" for key, value in options.items() if value is not None] + list(extra or [])


class EventBar:
    """The CLI's view of a run's progress events (``posenc.engine.context.Event``): one rich
    bar per stage, its units done, the latest loss and throughput; nothing when quiet."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> EventBar:
        return self

    def __call__(self, event: Any) -> None:
        if self.quiet:
            return
        if event.kind == "message":
            err_console.print(event.label, highlight=False, soft_wrap=True, markup=False)
        elif event.kind == "stage":
            self.close()
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err_console,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(event.label, total=max(event.total or 1, 1), info="")
        elif event.kind == "advance" and self._bar is not None:
            info = []
            if "train_loss" in event.fields:
                info.append(f"loss {event.fields['train_loss']:.3f}")
            if "tokens_per_s" in event.fields:
                info.append(f"{event.fields['tokens_per_s']:,.0f} tok/s")
            text = "  ".join(info) or event.fields.get("info", "")
            update: dict[str, Any] = {"info": text} if text else {}  # a validation record keeps the last loss
            if event.done is not None:
                update["completed"] = event.done
            if event.label:
                update["description"] = event.label
            self._bar.update(self._task, **update)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def __exit__(self, *exc: Any) -> None:
        self.close()


def print_record(title: str, row: dict[str, Any]) -> None:
    """A two-column rich table of one result row."""
    from rich.table import Table

    table = Table(title=title, show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in row.items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    console.print(table)
