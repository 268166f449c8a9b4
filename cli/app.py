"""The Typer application. Each command group lives in its own module; torch loads lazily."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from posenc.cli.bench import bench
from posenc.cli.check import check
from posenc.cli.compare import compare
from posenc.cli.export import export
from posenc.cli.extrapolate import extrapolate
from posenc.cli.list import list_
from posenc.cli.order import order
from posenc.cli.report import report
from posenc.cli.resolution import resolution
from posenc.cli.runs import runs
from posenc.cli.suite import suite
from posenc.cli.sweep import sweep
from posenc.cli.train import train

try:  # recent Typer vendors click; older releases use click itself
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - depends on the installed Typer
    from click import exceptions as click_exceptions

app = typer.Typer(
    name="posenc",
    help="Experiments on positional encodings in Transformers: train, compare schemes, test the theory.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion; option values complete from the config tree (cli.completion)
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        import posenc

        print(f"posenc {posenc.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_print_version, is_eager=True, help="Print posenc's version and exit."
        ),
    ] = False,
) -> None:
    """Experiments on positional encodings in Transformers: train, compare schemes, test the theory."""


app.command("train")(train)
app.command("list")(list_)
app.command("bench")(bench)
app.command("order")(order)
app.command("check")(check)
app.command("extrapolate")(extrapolate)
app.command("export")(export)
app.command("resolution")(resolution)
app.command("sweep")(sweep)
app.command("compare")(compare)
app.command("report")(report)
app.command("suite")(suite)
app.command("runs")(runs)


def main() -> None:
    """Run the app; a usage mistake (bad option, bad value) is one line on stderr and exit 2."""
    try:
        code = app(standalone_mode=False)
    except click_exceptions.UsageError as e:
        if not e.format_message():  # `posenc` alone: the help page was printed
            sys.exit(2)
        command = f"posenc {e.ctx.info_name} --help" if e.ctx and e.ctx.parent else "posenc --help"
        print(f"error: {e.format_message()} (see '{command}')", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)
