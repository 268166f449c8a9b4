"""``posenc order``: the permutation test and the order task, across schemes and models."""

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
    Steps,
    console,
    overrides_from,
    print_frame,
    user_errors,
)
from posenc.cli.completion import options_of
from posenc.core.text import split_list


def names(value: str | None, option: str) -> list[str] | None:
    """A comma list of option names from the command line, or None when not given."""
    return None if value is None else split_list(value, option)


def order(
    pe: Annotated[
        str | None,
        typer.Option(
            help="Comma list of schemes. Default: every scheme that fits a model.", autocompletion=options_of("pe")
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Comma list of models. Default: every model option.", autocompletion=options_of("model")),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            help="Comma list of order tasks. Default: every task with order_labels.", autocompletion=options_of("task")
        ),
    ] = None,
    permutations: Annotated[
        int, typer.Option("--permutations", "-k", help="Random permutations K per measurement.")
    ] = 8,
    steps: Steps = None,
    seed: Seed = None,
    results_dir: ResultsDir = None,
    quiet: Quiet = False,
    config_dir: ConfigDir = None,
    overrides: Overrides = None,
) -> None:
    """Shuffle the input tokens K times and measure how much the output moves, at
    initialization and after training on the order task (same tokens, the label depends only
    on their order); report the order-task accuracy against chance. A model with a causal mask
    runs with and without it. Writes order.csv/.md and order.png.

    Example: posenc order --pe nope,rope -k 16 model.n_layers=2
    """
    with user_errors():
        from posenc.core.errors import ConfigError
        from posenc.engine.context import RunContext, main_table
        from posenc.engine.results import results_root
        from posenc.experiments.cache import TRAINED_AT
        from posenc.experiments.order import Order, plan, run

        root = results_root(results_dir)  # a bad root stops here, before any work

        if permutations < 1:
            raise ConfigError(f"--permutations must be >= 1, got {permutations}")
        given = overrides_from({"train.steps": steps, "seed": seed}, overrides)
        cells, skipped = plan(names(model, "--model"), names(pe, "--pe"), names(task, "--task"), given)
        with EventBar(quiet) as bar:
            device, config = cells[0].setup.train.device, cells[0].setup.config
            ctx = RunContext(root, on_event=bar, overrides=given, device_name=device, config=config)
            result = run(cells, skipped, ctx, permutations=permutations)
    spec = main_table(Order)
    show = result.table.drop(columns=["train_seconds"], errors="ignore")
    print_frame(show, [*spec.keys, *spec.pairs], "order: permutation test and order task", facts=TRAINED_AT)
    console.print(f"run directory: {result.run.path}", highlight=False, soft_wrap=True)
