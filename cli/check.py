"""``posenc check``: numeric checks of the seed's mathematics (C4, C8/C9, C10) on every scheme."""

from __future__ import annotations

from typing import Annotated

import typer

from posenc.cli.common import (
    ConfigDir,
    EventBar,
    Overrides,
    Quiet,
    ResultsDir,
    Seed,
    console,
    fail,
    print_frame,
    user_errors,
)
from posenc.cli.completion import options_of
from posenc.cli.order import names


def check(
    pe: Annotated[
        str | None,
        typer.Option(help="Comma list of schemes. Default: every scheme in the tree.", autocompletion=options_of("pe")),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Comma list of models a scheme is built with. Default: all.", autocompletion=options_of("model")
        ),
    ] = None,
    seed: Seed = None,
    results_dir: ResultsDir = None,
    quiet: Quiet = False,
    config_dir: ConfigDir = None,
    overrides: Overrides = None,
) -> None:
    """Measure what the theory claims (sinusoidal shift, RoPE relative invariance and norms,
    V untouched, bias depends only on i − j, long-term decay, periodicity) against stated
    tolerances. Writes check.csv/.md and a figure per check (plots.format=png|svg|pdf). Exit status 1
    when a check fails, so it doubles as a self-test of a torch build or device.

    Example: posenc check --pe rope,sinusoidal pe.base=500000
    """
    with user_errors():
        from posenc.engine.context import RunContext, main_table
        from posenc.engine.results import results_root
        from posenc.experiments.check import Check, plan, plot_format, run

        root = results_root(results_dir)  # a bad root stops here, before any work

        given = list(overrides or [])
        fmt = plot_format(given)
        schemes, skipped = plan(names(pe, "--pe"), names(model, "--model"), given, seed or 0)
        with EventBar(quiet) as bar:
            ctx = RunContext(root, on_event=bar, overrides=given)
            result = run(schemes, skipped, ctx, seed=seed or 0, config={"overrides": given}, fmt=fmt)
    table, run_dir = result.table, result.run
    shown = table if not quiet else table[~table.passed.astype(bool)]
    if len(shown):
        spec = main_table(Check)
        print_frame(shown.drop(columns=["note"]), [*spec.keys, *spec.pairs], "numeric checks of the claims")
    console.print(f"run directory: {run_dir.path}", highlight=False, soft_wrap=True)
    failed = int((~table.passed.astype(bool)).sum())
    if failed:
        raise fail(f"{failed} of {len(table)} checks failed", code=1)
    if len(table):
        console.print(f"all {len(table)} checks passed", highlight=False)
    else:
        console.print(
            "no check applies to these schemes (none is a fixed embedding, rotates Q and K, or adds a bias)",
            highlight=False,
        )
