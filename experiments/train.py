"""Protocol ``train``: train one model on one task and score it on the validation split."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from posenc.core.errors import Interrupted, TrainingDiverged
from posenc.core.io import write_table
from posenc.engine.build import Setup, build
from posenc.engine.evaluation import evaluate
from posenc.engine.results import RunDir
from posenc.engine.training import TrainResult, resolve_device, train


def run_name(choices: dict[str, Any]) -> str:
    return "-".join(str(choices[g]) for g in ("model", "pe", "task") if choices.get(g))


def input_size(setup: Setup) -> int:
    """The ``size`` of a training batch (``task.input_size``)."""
    return setup.task.input_size(setup.train.seq_len)


def eval_data(setup: Setup, max_items: int | None) -> tuple:
    """The validation set at the training batch's size (``task.eval_set``)."""
    return setup.task.eval_set(input_size(setup), max_items)


def fit(
    setup: Setup, run_dir: RunDir, on_log: Callable[[dict[str, Any]], None] | None = None, resume: bool = False
) -> TrainResult:
    """Train ``setup.model`` (sequences at ``train.seq_len``) to its target or the step cap,
    validating on a sample (``eval.periodic_windows``) every ``train.eval_every`` steps.

    Checkpoints and metrics go to ``run_dir``; its summary records whether the target was
    reached and at which step. With ``resume``, training continues from its last checkpoint.
    A failure is marked in its summary and re-raised; so is a stop signal (``interrupted``,
    after the checkpoint).
    """
    task, ev, size = setup.task, setup.eval, input_size(setup)
    batches = lambda b, g: task.train_batch(b, size, g)  # noqa: E731
    periodic = eval_data(setup, ev.periodic_windows)
    device = resolve_device(setup.train.device)
    try:
        result = train(
            setup.model,
            batches,
            setup.train,
            seed=setup.seed,
            run=run_dir,
            validate=lambda m: evaluate(m, *periodic, batch_size=ev.batch_size, device=device),
            on_log=on_log,
            resume=resume,
            target=setup.target,
        )
    except (Interrupted, KeyboardInterrupt, SystemExit) as e:  # SystemExit: submitit requeues
        run_dir.update_summary(status="interrupted", error=str(e) or type(e).__name__)
        raise
    except TrainingDiverged as e:
        run_dir.update_summary(status="failed", error=str(e))
        raise
    except BaseException as e:
        run_dir.update_summary(status="failed", error=f"{type(e).__name__}: {e}")
        raise
    run_dir.update_summary(**result.target_record())
    return result


def run(
    cfg: DictConfig,
    *,
    results_root: Path,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    resume: Path | None = None,
) -> tuple[pd.DataFrame, RunDir]:
    """Train, evaluate on every validation window, write the run directory, return its table.

    All checks happen in ``build`` before the run directory is created. ``resume`` continues
    the run in that directory from its last checkpoint; it must hold the same config.
    """
    setup = build(cfg)
    if resume is None:
        run_dir = RunDir.create(results_root, run_name(setup.config["choices"]), setup.config)
    else:
        run_dir = RunDir.reopen(resume, setup.config)
    device = resolve_device(setup.train.device)
    task, ev = setup.task, setup.eval
    images = task.kind == "image"
    final = eval_data(setup, ev.max_windows)

    started = time.perf_counter()
    result = fit(setup, run_dir, on_log, resume=resume is not None)
    scores = evaluate(setup.model, *final, batch_size=ev.batch_size, device=device)
    choices = setup.config["choices"]
    row = {
        "model": choices["model"],
        "pe": choices["pe"],
        "task": choices["task"],
        "seed": setup.seed,
        "steps": result.steps,
        **result.target_record(),
    }
    if images:
        pixels = final[0][0].numel()  # the loop counts input elements: C·H·W per image
        row |= {
            "resolution": task.resolution,
            "params": sum(p.numel() for p in setup.model.parameters()),
            "train_loss": result.train_loss,
            "val_loss": scores["loss"],
            "val_accuracy": scores["accuracy"],
            "chance": 1 / task.num_classes,
            "images_per_s": result.tokens_per_s / pixels,
        }
    else:
        row |= {
            "seq_len": setup.train.seq_len,
            "params": sum(p.numel() for p in setup.model.parameters()),
            "train_loss": result.train_loss,
            "val_loss": scores["loss"],
            "val_bpb": scores["bits"],
            "val_ppl": scores["ppl"],
            "val_accuracy": scores["accuracy"],
            # a corpus has a unigram baseline; a generated task does not
            **({"unigram_bpb": unigram} if (unigram := task.unigram_bits_per_byte()) is not None else {}),
            "tokens_per_s": result.tokens_per_s,
        }
    row["seconds"] = time.perf_counter() - started
    table = pd.DataFrame([row])
    write_table(table, run_dir.path)
    extra = {} if images else {"per_position_loss": scores["per_position"]}
    run_dir.update_summary(status="completed", device=str(device), run_dir=str(run_dir.path), **extra, **row)
    return table, run_dir
