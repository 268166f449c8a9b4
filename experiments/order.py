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
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig

from posenc.analysis.permutation import permutation_test
from posenc.core.errors import ConfigError
from posenc.core.io import write_table
from posenc.engine.build import Setup, build
from posenc.engine.config import compose, experiment_settings, list_options
from posenc.engine.evaluation import IGNORE_INDEX, evaluate
from posenc.engine.results import RunDir
from posenc.engine.training import TrainResult, resolve_device, train
from posenc.experiments.train import eval_data, input_size
from posenc.reporting.style import pyplot, save_figure
from posenc.tasks.base import Task

INVARIANCE_TOL = 1e-5  # relative residual of float32 attention whose sums run in another order
TRAIN_OPTION = "order"  # configs/train/order.yaml: short sequences, a few hundred steps

ProgressFactory = Callable[[str, int], AbstractContextManager[Callable[[dict[str, Any]], None] | None]]


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


def _is_image_task(name: str) -> bool:
    cls = _task_class(name)
    return cls is not None and cls.kind == "image"


def _check_names(group: str, names: Sequence[str]) -> None:
    valid = list_options(group)
    for name in names:
        if name not in valid:
            raise ConfigError(f"unknown {group} '{name}'; valid: {', '.join(valid)}")


def _has_train_override(overrides: Sequence[str]) -> bool:
    return any(o.split("=", 1)[0].lstrip("+~") == "train" for o in overrides)


def _cells(model: str, pe: str, task: str, overrides: Sequence[str]) -> list[Cell]:
    """The built cells of one model, scheme and task: with and without the causal mask when the
    model has a ``causal`` key, else the model as configured."""
    names = [f"model={model}", f"pe={pe}", f"task={task}", *overrides]
    modes = [True, False] if "causal" in compose(names).model else [None]
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
    model_names = list(models or list_options("model"))
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
    # sequence tasks train with configs/train/order.yaml unless the user picked a train option;
    # image tasks keep the default (their size comes from the task, not train.seq_len)
    base = {
        t: [] if _has_train_override(overrides) or _is_image_task(t) else [f"train={TRAIN_OPTION}"] for t in task_names
    }
    cells, skipped = [], []
    for model in model_names:
        for pe in pe_names:
            reasons = []
            for task in task_names:  # the first order task the model fits
                try:
                    cells.extend(_cells(model, pe, task, [*base[task], *overrides]))
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


def task_data(setup: Setup) -> tuple[Callable[[int, torch.Generator], Any], tuple[torch.Tensor, torch.Tensor]]:
    """Training batches and the evaluation set of a sequence task or an image task.

    Sequence tasks (``eval_windows``) are cut at ``train.seq_len``; image tasks (``kind ==
    "image"``, the ViT's) give one label per image and have their own resolution.
    """
    task, ev, size = setup.task, setup.eval, input_size(setup)
    batches = lambda b, g: task.train_batch(b, size, g)  # noqa: E731
    if task.kind == "image":
        return batches, task.eval_set(max_items=ev.max_windows)
    return batches, task.eval_windows(size, ev.max_windows)


def chance_of(task: Task, targets: torch.Tensor) -> float:
    """The accuracy of a model blind to order: the task's ``chance_accuracy`` if it states one,
    else always answering the most frequent class of the evaluated labels (never below 1/C)."""
    if task.chance_accuracy is not None:
        return float(task.chance_accuracy)
    scored = targets[targets != IGNORE_INDEX]
    majority = float(scored.bincount().max()) / len(scored) if len(scored) else float("nan")
    classes = task.num_classes if task.kind == "image" else None
    return max(majority, 1.0 / classes) if classes else majority


def measure(cell: Cell, permutations: int, device: torch.device, seed: int) -> dict[str, Any]:
    """The permutation scores and the order-task accuracy of the cell's model as it is now."""
    setup = cell.setup
    x, y = task_data(setup)[1]
    scores = permutation_test(
        setup.model, x, permutations, torch.Generator().manual_seed(seed), batch_size=setup.eval.batch_size
    )
    accuracy = evaluate(setup.model, x, y, batch_size=setup.eval.batch_size, device=device)["accuracy"]
    row = scores.as_dict()
    row["invariant"] = scores.equivariance_residual <= INVARIANCE_TOL
    chance = chance_of(setup.task, y)
    row["accuracy"] = accuracy
    row["chance"] = chance
    # one-sided 95% binomial bound: above it, the model read the order (not luck on n examples)
    row["chance_95"] = chance + 1.645 * math.sqrt(chance * (1 - chance) / len(y))
    row["above_chance"] = accuracy > row["chance_95"]
    return row


def train_cell(cell: Cell, on_log: Callable[[dict[str, Any]], Any]) -> TrainResult:
    """Train the cell's model on its task with the one training loop, to its target or the cap,
    validating on ``eval.periodic_windows`` items every ``train.eval_every`` steps."""
    setup = cell.setup
    device = resolve_device(setup.train.device)
    periodic = eval_data(setup, setup.eval.periodic_windows)
    return train(
        setup.model,
        task_data(setup)[0],
        setup.train,
        seed=setup.seed,
        on_log=on_log,
        validate=lambda m: evaluate(m, *periodic, batch_size=setup.eval.batch_size, device=device),
        target=setup.target,
    )


def run(
    cells: list[Cell],
    skipped: list[dict[str, str]],
    *,
    permutations: int,
    results_root: Path,
    progress: ProgressFactory | None = None,
) -> tuple[pd.DataFrame, RunDir]:
    """Measure at init, train, measure again; write the table, a plot and the summary."""
    if permutations < 1:
        raise ConfigError(f"--permutations must be >= 1, got {permutations}")
    config = {"permutations": permutations, "cells": {c.label: c.setup.config for c in cells}, "skipped": skipped}
    run_dir = RunDir.create(results_root, "order", config)
    rows = []
    try:
        for cell in cells:
            setup = cell.setup
            device = resolve_device(setup.train.device)
            setup.model.to(device)
            head = {"model": cell.model, "attention": cell.attention, "pe": cell.pe, "task": cell.task}
            rows.append({**head, "phase": "init", **measure(cell, permutations, device, setup.seed)})
            started = time.perf_counter()
            with progress(cell.label, setup.train.steps) if progress else nullcontext() as bar:

                def log(record: dict[str, Any], head: dict[str, str] = head, bar: Any = bar) -> None:
                    run_dir.log({**head, **record})
                    if bar is not None:
                        bar(record)

                result = train_cell(cell, log)
            rows.append(
                {
                    **head,
                    "phase": "trained",
                    **measure(cell, permutations, device, setup.seed),
                    "train_loss": result.train_loss,
                    "steps": result.steps,
                    **result.target_record(),
                    "train_seconds": time.perf_counter() - started,
                }
            )
            write_table(pd.DataFrame(rows), run_dir.path, "order")
    except BaseException as e:
        run_dir.update_summary(status="failed", error=f"{type(e).__name__}: {e}")
        raise
    table = pd.DataFrame(rows)
    write_table(table, run_dir.path, "order")
    plot(table, run_dir.path / "order.png")
    run_dir.update_summary(
        status="completed",
        run_dir=str(run_dir.path),
        rows=len(table),
        skipped=skipped,
        invariance_tolerance=INVARIANCE_TOL,
        table="order",
    )
    return table, run_dir


@dataclass
class OrderConfig:
    """The ``order`` node of ``experiment=order``: ``plan``'s names (null: every option that fits),
    the number of permutations, and overrides composed into every cell (``train.steps=100``)."""

    models: list[str] | None = None
    pes: list[str] | None = None
    tasks: list[str] | None = None
    permutations: int = 8
    overrides: list[str] = field(default_factory=list)


def check_job(cfg: DictConfig) -> tuple[OrderConfig, list[Cell], list[dict[str, str]]]:
    """The settings and the built cells of a sweep job (``posenc sweep`` calls this first)."""
    settings = experiment_settings(cfg, "order", OrderConfig)
    if settings.permutations < 1:
        raise ConfigError(f"order.permutations must be >= 1, got {settings.permutations}")
    cells, skipped = plan(settings.models, settings.pes, settings.tasks, [*settings.overrides, f"seed={cfg.seed}"])
    return settings, cells, skipped


def job(cfg: DictConfig, *, results_root: Path) -> tuple[pd.DataFrame, RunDir]:
    """The sweep protocol (``experiment=order``): every planned cell at the config's seed."""
    settings, cells, skipped = check_job(cfg)
    return run(cells, skipped, permutations=settings.permutations, results_root=results_root)


def plot(table: pd.DataFrame, path: Path) -> None:
    """Equivariance residual (log) and order-task accuracy per cell, at init and trained."""
    plt = pyplot()

    labels = [f"{r.pe}\n{r.attention}\n{r.model}" for r in table[table.phase == "init"].itertuples()]
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.3 * len(labels)), 4.5))
    width = 0.4
    for i, phase in enumerate(("init", "trained")):
        part = table[table.phase == phase]
        xs = [j + (i - 0.5) * width for j in range(len(part))]
        axes[0].bar(xs, part.equivariance_residual.clip(lower=1e-12), width, label=phase)
        axes[1].bar(xs, part.accuracy, width, label=phase)
    axes[1].axhline(float(table.chance_95.max()), color="grey", ls=":", lw=1, label="chance, 95% bound")
    axes[0].set_yscale("log")
    axes[0].axhline(INVARIANCE_TOL, color="k", ls="--", lw=1, label=f"invariance tolerance {INVARIANCE_TOL:g}")
    axes[0].set_title("‖f(Px) − P·f(x)‖ / ‖f(x)‖ (max over permutations)")
    chance = table.chance.dropna()
    if len(chance):
        axes[1].axhline(float(chance.iloc[0]), color="k", ls="--", lw=1, label="chance")
    axes[1].set_ylim(0, 1.05)
    axes[1].set_title("order-task accuracy")
    for ax in axes:
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
