"""Options and helpers shared by every command: overrides, errors, progress, tables."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
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
    bar per stage, its units done, the latest loss and throughput and the time left; nothing
    but warnings when quiet. A stage that stops at its target before the cap ends full.

    The time left is the stage's rate since its first record (rich's default 30-second window
    holds a single record when records come further apart, and shows no estimate at all).
    ``console`` and ``clock`` (seconds) are the terminal's and the wall clock by default."""

    def __init__(self, quiet: bool = False, *, console: Console | None = None, clock: Any = None) -> None:
        self.quiet = quiet
        self.console = console
        self.clock = clock
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> EventBar:
        return self

    def __call__(self, event: Any) -> None:
        if self.quiet and not event.fields.get("warning"):  # a warning prints even when quiet
            return
        if event.kind == "message":
            (self.console or err_console).print(event.label, highlight=False, soft_wrap=True, markup=False)
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
                console=self.console or err_console,
                speed_estimate_period=float("inf"),  # rich keeps its last 1000 records
                **({"get_time": self.clock} if self.clock is not None else {}),
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
            if event.fields.get("reached_target"):  # training stops here: the stage is done
                update["completed"] = self._bar.tasks[0].total
                update["info"] = f"target reached at step {event.done}"
            self._bar.update(self._task, **update)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def __exit__(self, *exc: Any) -> None:
        self.close()


def fit(widths: Mapping[str, int], front: Sequence[str], rest: Sequence[str], width: int) -> tuple[list, list]:
    """The columns each stacked table repeats and the columns of each table, so that every table
    fits ``width`` (a rich column takes its text and 3 characters, a table 1 more): ``front``,
    or a row number ``#`` (its width in ``widths``) with ``front`` among the rest when ``front``
    leaves no room for the widest of them; each of the rest, in order, into the first table with
    room for it."""
    budget = width - 1
    front, rest = list(front), list(rest)
    if rest and sum(widths[c] + 3 for c in front) + max(widths[c] + 3 for c in rest) > budget:
        front, rest = ["#"], front + rest
    room = budget - sum(widths[c] + 3 for c in front)
    parts: list[list[str]] = []
    for c in rest:  # into the first table with room, so a wide column does not strand a narrow one
        part = next((p for p in parts if sum(widths[x] + 3 for x in p) + widths[c] + 3 <= room), None)
        if part is None:
            parts.append(part := [])
        part.append(c)
    return front, parts or [[]]


def print_stacked(
    cells: Mapping[str, Sequence[str]], front: Sequence[str], rest: Sequence[str], title: str = ""
) -> None:
    """Columns of rich-markup cells in as many stacked tables as the terminal's width needs
    (``fit``), each repeating the ``front`` columns (left) before its share of ``rest`` (right),
    so that no header and no value is cut."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    rows = len(next(iter(cells.values()), []))
    cells = {"#": [str(i + 1) for i in range(rows)], **cells}
    width = {c: max([len(str(c)), *(Text.from_markup(x).cell_len for x in cells[c])]) for c in cells}
    shown_front, parts = fit(width, front, rest, console.width)
    if title:  # above the tables, not squeezed into the first one's width
        console.print(f"[bold]{escape(title)}[/]", highlight=False)
    room = console.width - 1 - sum(width[c] + 3 for c in shown_front)
    for part in parts:
        view = Table(show_header=True, header_style="bold")
        for c in [*shown_front, *part]:
            left = c in front or c == "#"
            if c in part and width[c] + 3 > room:  # wider than any table can be: wrapped at spaces, not cut
                view.add_column(str(c), justify="left", overflow="fold")
            else:
                view.add_column(str(c), justify="left" if left else "right", min_width=width[c], no_wrap=True)
        for i in range(rows):
            view.add_row(*(cells[c][i] for c in [*shown_front, *part]))
        console.print(view)


def value_text(v: Any, floatfmt: str = ".4g") -> str:
    """A cell as the terminal shows it: floats to ``floatfmt``, a missing value as ``–``."""
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    return format(v, floatfmt) if isinstance(v, float) else str(v)


def print_frame(
    table: Any, keys: Sequence[str], title: str = "", facts: Sequence[str] = (), notes: Sequence[str] = ()
) -> None:
    """A result table at the terminal's width without cutting a header or a number: the columns
    equal on every row go to a footnote line, the ``facts`` columns (how each model trained) to a
    second table with only the keys they vary with, the rest in stacked tables that repeat the
    ``keys``; ``notes`` are printed below, one line each."""
    from rich.markup import escape

    facts = [c for c in facts if c in table.columns]
    text = {c: [escape(value_text(v)) for v in table[c]] for c in table.columns}
    same = [c for c in table.columns if len(table) > 1 and len(set(text[c])) == 1]
    main = [c for c in table.columns if c not in same and c not in facts]
    front = [c for c in keys if c in main]
    print_stacked({c: text[c] for c in main}, front, [c for c in main if c not in front], title)
    if facts:
        varying = [c for c in facts if c not in same]
        if varying:
            known = table.dropna(subset=varying, how="all")  # rows of an untrained model say nothing
            by = [k for k in keys if k in main]
            for k in list(by):  # keep only the keys the facts vary with
                rest = [x for x in by if x != k]
                groups = known.groupby(rest, sort=False) if rest else [((), known)]
                if all(len(part[varying].astype(str).drop_duplicates()) == 1 for _, part in groups):
                    by = rest
            rows = known.loc[known[by + varying].astype(str).drop_duplicates().index]
            print_stacked({c: [escape(value_text(v)) for v in rows[c]] for c in by + varying}, by, varying, "training")
    footnote = ", ".join(f"{c}={value_text(table[c].iloc[0])}" for c in same)  # printed without markup
    for line in ([f"every row: {footnote}"] if footnote else []) + list(notes):
        console.print(line, highlight=False, markup=False)  # wrapped at spaces, never inside a value


def print_record(title: str, row: dict[str, Any], facts: Sequence[str] = ()) -> None:
    """One result row as two-column tables: its scores, then how the model trained (``facts``)."""
    from rich.table import Table

    for heading, keys in ((title, [k for k in row if k not in facts]), ("training", [k for k in facts if k in row])):
        if not keys:
            continue
        table = Table(title=heading, show_header=True)
        table.add_column("metric" if heading == title else "fact")
        table.add_column("value", justify="right")
        for key in keys:
            table.add_row(key, value_text(row[key]))
        console.print(table)
