"""Protocol ``order``: are models blind to order without positions, and does training read it?

For every model option × position scheme that fit together (fit is decided by building them: a
``ConfigError`` means they do not), and for a model with a ``causal`` key both with and without
the causal mask:

1. at initialization, the permutation test (``posenc.analysis.permutation``) on the validation inputs
   and the accuracy on an order task;
2. after training on that task with the one training loop, the same two again.

An order task is any task option whose class sets ``order_labels = True`` (the same multiset of
tokens, a label that depends only on their order); each model takes the first one it fits.
Nothing the theory predicts is written in here: invariance is measured against a float
tolerance, accuracy against the task's stated chance level.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig

from posenc.analysis.permutation import permutation_test
from posenc.core.errors import ConfigError
from posenc.engine.build import Setup, build, trainable_models
from posenc.engine.config import compose, experiment_settings, list_options
from posenc.engine.context import Result, RunContext, TableSpec
from posenc.engine.evaluation import IGNORE_INDEX, evaluate
from posenc.engine.training import TrainResult, train
from posenc.reporting.style import COLOURS, figure_format, legend_outside, pyplot, save_figure
from posenc.tasks.base import EvalSplit, Task

INVARIANCE_TOL = 1e-5  # relative residual of float32 attention whose sums run in another order

TABLES = (
    TableSpec(
        "order",
        keys=("model", "attention", "pe", "task", "phase"),
        pairs=("seed",),
        main=True,
        description="permutation scores and order-task accuracy per cell, at init and trained",
    ),
)


@dataclass
class Cell:
    model: str
    attention: str
    pe: str
    task: str
    setup: Setup

    @property
    def label(self) -> str:
        return f"{self.model}/{self.attention}/{self.pe}"


def _task_class(name: str) -> type | None:
    """The class a task option names with ``_target_`` (imported, not built), or None."""
    from posenc.engine.config import option_class

    try:
        return option_class("task", name)
    except ConfigError:
        return None


def order_tasks() -> list[str]:
    """Task options whose class declares ``order_labels`` (read from ``_target_``, not built).

    A class may make it depend on its settings (an image task whose label is "A above B" is an
    order task, one whose label is the shape is not); the built task decides in ``_cells``.
    """
    return [name for name in list_options("task") if (cls := _task_class(name)) is not None and cls.order_labels]


def _check_names(group: str, names: Sequence[str]) -> None:
    valid = list_options(group)
    for name in names:
        if name not in valid:
            raise ConfigError(f"unknown {group} '{name}'; valid: {', '.join(valid)}")


def _cells(model: str, pe: str, task: str, overrides: Sequence[str]) -> list[Cell]:
    """The built cells of one model, scheme and task: with and without the causal mask when the
    model has a ``causal`` key, else the model as configured.

    The task brings its training recipe (task=order selects configs/train/order.yaml, short
    sequences) unless the user picked a train option.
    """
    picked = [f"model={model}", f"pe={pe}", f"task={task}"]
    names = [*picked, *overrides]
    cfg = compose(names)
    modes = [True, False] if "causal" in cfg.model else [None]
    cells = []
    for causal in modes:
        setup = build(compose([*names, *([] if causal is None else [f"model.causal={str(causal).lower()}"])]))
        if not setup.task.order_labels:
            raise ConfigError(f"task '{task}' with these settings does not label order (order_labels is false)")
        attention = "causal" if getattr(setup.model, "causal", False) else "bidirectional"
        cells.append(Cell(model, attention, pe, task, setup))
    return cells


def plan(
    models: Sequence[str] | None = None,
    pes: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    overrides: Sequence[str] = (),
) -> tuple[list[Cell], list[dict[str, str]]]:
    """Every cell to run, built and checked, and the (model, pe) pairs skipped with the reason.

    Names given explicitly must exist, and every explicitly named scheme must fit at least one
    model; otherwise ``ConfigError`` names the mismatch. With no names, every option is tried.
    """
    for group, names in (("model", models), ("pe", pes), ("task", tasks)):
        if names:
            _check_names(group, names)
    model_names = list(models or trainable_models())
    pe_names = list(pes or list_options("pe"))
    order_task_names = order_tasks()
    for task in tasks or ():
        if task not in order_task_names:
            raise ConfigError(
                f"task '{task}' is not an order task (labels that depend only on order); "
                f"order tasks: {', '.join(order_task_names) or 'none'}"
            )
    task_names = list(tasks or order_task_names)
    if not task_names:
        raise ConfigError("no order task in the config tree (a task class with order_labels = True)")
    cells, skipped = [], []
    for model in model_names:
        for pe in pe_names:
            reasons = []
            for task in task_names:  # the first order task the model fits
                try:
                    cells.extend(_cells(model, pe, task, overrides))
                    break
                except ConfigError as e:
                    reasons.append(f"{task}: {e}")
            else:
                skipped.append({"model": model, "pe": pe, "reason": "; ".join(reasons)})
    if pes:
        for pe in pes:
            if not any(c.pe == pe for c in cells):
                why = "; ".join(f"{s['model']}: {s['reason']}" for s in skipped if s["pe"] == pe)
                raise ConfigError(f"pe '{pe}' does not fit model {', '.join(model_names)} ({why})")
    if not cells:
        raise ConfigError("no model and scheme fit together; see `posenc list model` and `posenc list pe`")
    return cells, skipped


def input_size(setup: Setup) -> int:
    """The size of the cell's batches: ``train.seq_len`` tokens, or the image task's resolution."""
    return setup.task.input_size(setup.train.seq_len)


def eval_data(setup: Setup, max_items: int | None, split: EvalSplit) -> tuple[torch.Tensor, torch.Tensor]:
    """The task's fixed set of ``split`` at the cell's input size: windows or images, and targets
    (training validates on ``val``; the table reports ``test``)."""
    return setup.task.eval_set(input_size(setup), max_items, split)


def chance_of(task: Task, targets: torch.Tensor) -> float:
    """The accuracy of a model blind to order: the task's ``chance_accuracy`` if it states one,
    else always answering the most frequent class of the evaluated labels (at least 1/C of C
    classes, since the most frequent of C classes holds at least 1/C of the labels)."""
    if task.chance_accuracy is not None:
        return float(task.chance_accuracy)
    scored = targets[targets != IGNORE_INDEX]
    return float(scored.bincount().max()) / len(scored) if len(scored) else float("nan")


def measure(cell: Cell, permutations: int, device: torch.device, seed: int) -> dict[str, Any]:
    """The permutation scores and the order-task accuracy of the cell's model as it is now."""
    setup = cell.setup
    x, y = eval_data(setup, setup.eval.max_windows, "test")
    scores = permutation_test(
        setup.model, x, permutations, torch.Generator().manual_seed(seed), batch_size=setup.eval.batch_size
    )
    accuracy = evaluate(setup.model, x, y, batch_size=setup.eval.batch_size, device=device)["accuracy"]
    row = scores.as_dict()
    row["invariant"] = scores.equivariance_residual <= INVARIANCE_TOL
    chance = chance_of(setup.task, y)
    row["accuracy"] = accuracy
    row["split"], row["items"] = "test", len(y)
    row["chance"] = chance
    # one-sided 95% binomial bound: above it, the model read the order (not luck on n examples)
    row["chance_95"] = chance + 1.645 * math.sqrt(chance * (1 - chance) / len(y))
    row["above_chance"] = accuracy > row["chance_95"]
    return row


def train_cell(cell: Cell, device: torch.device, on_log: Callable[[dict[str, Any]], Any]) -> TrainResult:
    """Train the cell's model on its task with the one training loop, to its target or the cap,
    validating on ``eval.periodic_windows`` items every ``train.eval_every`` steps."""
    setup = cell.setup
    size = input_size(setup)
    periodic = eval_data(setup, setup.eval.periodic_windows, "val")
    return train(
        setup.model,
        lambda b, g: setup.task.train_batch(b, size, g),
        setup.train,
        seed=setup.seed,
        on_log=on_log,
        validate=lambda m: evaluate(m, *periodic, batch_size=setup.eval.batch_size, device=device),
        target=setup.target,
    )


def run(cells: list[Cell], skipped: list[dict[str, str]], ctx: RunContext, *, permutations: int) -> Result:
    """Measure at init, train, measure again, cell by cell into one run folder; write the table
    (after every cell, so a stopped run keeps what it measured), a plot and the summary."""
    if permutations < 1:
        raise ConfigError(f"--permutations must be >= 1, got {permutations}")
    if not cells:
        raise ConfigError("no cell to run")
    fmt = figure_format(cells[0].setup.config)  # a bad plots.format stops here, before any work
    config = {"permutations": permutations, "cells": {c.label: c.setup.config for c in cells}, "skipped": skipped}
    device = ctx.device
    rows: list[dict[str, Any]] = []
    with ctx.running("order", config) as run_dir:
        for cell in cells:
            setup = cell.setup
            setup.model.to(device)
            head = {"model": cell.model, "attention": cell.attention, "pe": cell.pe, "task": cell.task}
            seed = {"seed": setup.seed}
            rows.append({**head, "phase": "init", **seed, **measure(cell, permutations, device, setup.seed)})
            started = time.perf_counter()
            advance = ctx.stage(f"order {cell.label}", setup.train.steps)

            def log(record: dict[str, Any], head: dict[str, str] = head, advance: Any = advance) -> None:
                run_dir.log({**head, **record})  # the stage (advance) sends the record to the sinks
                advance(record)

            result = train_cell(cell, device, log)
            rows.append(
                {
                    **head,
                    "phase": "trained",
                    **seed,
                    **measure(cell, permutations, device, setup.seed),
                    "train_loss": result.train_loss,
                    "steps": result.steps,
                    **result.target_record(),
                    "train_seconds": time.perf_counter() - started,
                }
            )
            out = ctx.write(run_dir, TABLES, {"order": pd.DataFrame(rows)})
        table = out.table
        plot(table, run_dir.path / f"order.{fmt}")
        run_dir.update_summary(rows=len(table), skipped=skipped, invariance_tolerance=INVARIANCE_TOL)
    return out


@dataclass
class OrderConfig:
    """The ``order`` node of ``experiment=order``: ``plan``'s names (null: every option that fits),
    the number of permutations, and overrides composed into every cell (``train.steps=100``)."""

    models: list[str] | None = None
    pes: list[str] | None = None
    tasks: list[str] | None = None
    permutations: int = 8
    overrides: list[str] = field(default_factory=list)


class Order:
    """The protocol of ``experiment=order``: every planned cell at the config's seed, one run folder."""

    tables = TABLES

    def plan(self, cfg: DictConfig) -> tuple[OrderConfig, list[Cell], list[dict[str, str]]]:
        """The settings and the built cells of the config."""
        settings = experiment_settings(cfg, "order", OrderConfig)
        if settings.permutations < 1:
            raise ConfigError(f"order.permutations must be >= 1, got {settings.permutations}")
        cells, skipped = plan(settings.models, settings.pes, settings.tasks, [*settings.overrides, f"seed={cfg.seed}"])
        return settings, cells, skipped

    def check(self, cfg: DictConfig) -> None:
        """Every name, setting and cell checked, each cell built as the run builds it."""
        self.plan(cfg)

    def run(self, cfg: DictConfig, ctx: RunContext) -> Result:
        settings, cells, skipped = self.plan(cfg)
        return run(cells, skipped, ctx, permutations=settings.permutations)


def plot(table: pd.DataFrame, path: Path) -> None:
    """Equivariance residual (log) and order-task accuracy per cell, at init and trained (a colour
    and a hatch per phase, so the bars stay apart in greyscale); one legend outside the data."""
    plt = pyplot()

    labels = [f"{r.pe}\n{r.attention}\n{r.model}" for r in table[table.phase == "init"].itertuples()]
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.3 * len(labels)) + 1.5, 4.5), layout="constrained")
    width = 0.4
    for i, phase in enumerate(("init", "trained")):
        part = table[table.phase == phase]
        xs = [j + (i - 0.5) * width for j in range(len(part))]
        look = {"color": COLOURS[i], "hatch": "//" if i else None, "edgecolor": "white", "label": phase}
        axes[0].bar(xs, part.equivariance_residual.clip(lower=1e-12), width, **look)
        axes[1].bar(xs, part.accuracy, width, **look)
    axes[1].axhline(float(table.chance_95.max()), color="grey", ls=":", lw=1, label="chance, 95% bound")
    axes[0].set_yscale("log")
    axes[0].axhline(INVARIANCE_TOL, color="k", ls="--", lw=1, label=f"invariance tolerance {INVARIANCE_TOL:g}")
    axes[0].set_title("‖f(Px) − P·f(x)‖ / ‖f(x)‖ (max over permutations)")
    axes[0].set_ylabel("relative residual")
    chance = table.chance.dropna()
    if len(chance):
        axes[1].axhline(float(chance.iloc[0]), color="k", ls="--", lw=1, label="chance")
    axes[1].set_ylim(0, 1.05)
    axes[1].set_title("order-task accuracy")
    axes[1].set_ylabel("accuracy")
    for ax in axes:
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
    legend_outside(fig, axes)
    save_figure(fig, path)
