"""``posenc train``: one training run."""

from __future__ import annotations

from pathlib import Path
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
    print_record,
    user_errors,
)
from posenc.cli.completion import options_of


def train(
    model: Annotated[
        str | None, typer.Option(help="Model option (see `posenc list model`).", autocompletion=options_of("model"))
    ] = None,
    pe: Annotated[
        str | None, typer.Option(help="Position scheme (see `posenc list pe`).", autocompletion=options_of("pe"))
    ] = None,
    task: Annotated[
        str | None, typer.Option(help="Task option (see `posenc list task`).", autocompletion=options_of("task"))
    ] = None,
    steps: Steps = None,
    seed: Seed = None,
    results_dir: ResultsDir = None,
    quiet: Quiet = False,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Continue the run in this directory from its last checkpoint. Without other options "
            "it keeps the run's own config; with them, they must give the same config."
        ),
    ] = None,
    config_dir: ConfigDir = None,
    overrides: Overrides = None,
) -> None:
    """Train a model with a position scheme on a task and print its validation scores.

    Example: posenc train --pe rope model.n_layers=2 train.lr=1e-3
    """
    with user_errors():
        from omegaconf import OmegaConf

        from posenc.engine.config import compose
        from posenc.engine.context import RunContext
        from posenc.engine.results import RunDir, results_root
        from posenc.experiments.cache import TRAINED_AT
        from posenc.experiments.train import Train

        root = results_root(results_dir)  # a bad root stops here, before any work

        given = overrides_from({"model": model, "pe": pe, "task": task, "train.steps": steps, "seed": seed}, overrides)
        if resume is not None and not given:
            cfg = OmegaConf.create(RunDir.open(resume).read_config())
        else:
            cfg = compose(given)
        with EventBar(quiet) as bar:
            result = Train().run(cfg, RunContext(root, resume=resume, on_event=bar, overrides=given, config=cfg))
    label = f"train {cfg.choices.model}/{cfg.choices.pe}/{cfg.choices.task}"
    print_record(label, result.table.iloc[0].to_dict(), facts=TRAINED_AT)
    console.print(f"run directory: {result.run.path}", highlight=False, soft_wrap=True)
