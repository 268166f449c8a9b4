"""Protocol ``train``: train one model on one task, stop it on the validation split, and score
it on both held-out splits (the test split is what a table reports; validation is what chose
when to stop, so its score is the optimistic one)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from posenc.core.dtypes import slow_dtype_line
from posenc.engine.build import Setup, build
from posenc.engine.context import Result, RunContext, TableSpec
from posenc.engine.evaluation import evaluate
from posenc.engine.results import RunDir
from posenc.engine.training import PRECISIONS, TrainResult, resolve_device, train, under_target
from posenc.tasks.base import SPLITS


def run_name(choices: dict[str, Any]) -> str:
    return "-".join(str(choices[g]) for g in ("model", "pe", "task") if choices.get(g))


def fit(
    setup: Setup, run: RunDir, on_log: Callable[[dict[str, Any]], None] | None = None, resume: bool = False
) -> TrainResult:
    """Train ``setup.model`` (batches of ``task.input_size``) to its target or the step cap,
    validating on a sample (``eval.periodic_windows``) every ``train.eval_every`` steps.

    Checkpoints and metrics go to ``run``; its summary records whether the target was reached
    and at which step. With ``resume``, training continues from its last checkpoint. A failure
    propagates: the run context that opened ``run`` marks how it ended.
    """
    task, ev = setup.task, setup.eval
    size = task.input_size(setup.train.seq_len)
    periodic = task.eval_set(size, ev.periodic_windows)
    device = resolve_device(setup.train.device)
    result = train(
        setup.model,
        lambda b, g: task.train_batch(b, size, g),
        setup.train,
        seed=setup.seed,
        run=run,
        validate=lambda m: evaluate(m, *periodic, batch_size=ev.batch_size, device=device),
        on_log=on_log,
        resume=resume,
        target=setup.target,
    )
    run.update_summary(**result.target_record())
    return result


class Train:
    """Train, evaluate on every validation and test window (or image), write the run folder's table.

    Every check happens in ``build`` before the run folder exists. With ``ctx.resume`` the run
    in that folder continues from its last checkpoint; it must hold the same config.
    """

    tables = (
        TableSpec(
            "table",
            keys=("model", "pe", "task", "seed"),
            pairs=("seed",),
            main=True,
            description="one row: how training ended, and the validation (val_…) and test (test_…) scores",
        ),
    )

    def check(self, cfg: DictConfig) -> None:
        build(cfg)

    def run(self, cfg: DictConfig, ctx: RunContext) -> Result:
        setup = build(cfg)
        device = setup.place(ctx.device)
        task, ev, choices = setup.task, setup.eval, setup.config["choices"]
        size = task.input_size(setup.train.seq_len)
        held_out = {split: task.eval_set(size, ev.max_windows, split) for split in SPLITS}
        with ctx.running(run_name(choices), setup.config) as run:
            started = time.perf_counter()
            slow = slow_dtype_line(PRECISIONS[setup.train.precision], device)
            if slow:
                ctx.emit("message", slow, warning=True)
            on_log = ctx.stage(f"train {choices['model']}/{choices['pe']}/{choices['task']}", setup.train.steps)
            result = fit(setup, run, on_log, resume=ctx.resume is not None)
            line = under_target(
                f"{choices['pe']} (seed {setup.seed})", {"steps": result.steps, **result.target_record()}
            )
            if line:
                ctx.emit("message", line, warning=True)
            scores = {
                split: evaluate(setup.model, *data, batch_size=ev.batch_size, device=device)
                for split, data in held_out.items()
            }
            row = {
                "model": choices["model"],
                "pe": choices["pe"],
                "task": choices["task"],
                "seed": setup.seed,
                "steps": result.steps,
                **result.target_record(),
                "params": sum(p.numel() for p in setup.model.parameters()),
                "train_loss": result.train_loss,
                **task.train_columns(size, scores, result.tokens_per_s),
                "seconds": time.perf_counter() - started,
            }
            # the loss at every position, for sequences (an image has one label)
            extra = {"per_position_loss": scores["test"]["per_position"]} if "per_position" in scores["test"] else {}
            run.update_summary(device=str(device), attention_backend=setup.model.attention_backend, **extra, **row)
            return ctx.write(run, self.tables, {"table": pd.DataFrame([row])})
