"""One rescaled model scored at one length, and fine-tuning at a length.

Everything is scored on the task's test split (training stopped on its validation split). Text
is scored in bits per byte and perplexity over non-overlapping test windows, a generated task by
exact match of whole answers and by answer-token accuracy; the per-position loss is averaged
over position buckets.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch

from posenc.engine.build import Setup
from posenc.engine.evaluation import IGNORE_INDEX, evaluate
from posenc.engine.training import train
from posenc.tasks.base import SequenceTask


def score(
    model: torch.nn.Module, task: SequenceTask, length: int, setup: Setup, device: torch.device
) -> dict[str, Any]:
    """Scores on the test split at one length; a retrieval task (passkey) is scored per depth on
    the same number of sequences at every length and depth (``task.trials``), then pooled.

    Text: ``eval.max_windows`` caps the windows at the training length; at L there are
    max_windows · train_len / L of them, so every length reads the same bytes of the test split
    (all of it when the cap is null). ``items`` is the number of sequences scored.
    """
    train_len, cap = setup.train.seq_len, setup.eval.max_windows
    retrieval = task.retrieval_set(length, "test")
    if retrieval is None:
        x, y = task.eval_set(length, None if cap is None else max(1, cap * train_len // length), "test")
        groups = {None: slice(None)}
    else:
        (x, y), depths = retrieval, task.retrieval_depths()
        groups = {float(d): depths == d for d in depths.unique()}
    batch = max(1, setup.eval.batch_size * train_len // length)  # same tokens per batch at every length
    loss_sum = torch.zeros(length, dtype=torch.float64)  # (s,) summed loss of scored targets
    count = torch.zeros(length, dtype=torch.float64)  # (s,) number of scored targets
    correct, exact, items, by_depth = 0.0, 0, 0, {}
    for depth, rows in groups.items():
        scores = evaluate(model, x[rows], y[rows], batch_size=batch, device=device)
        c = (y[rows] != IGNORE_INDEX).sum(0).double()
        loss_sum += torch.tensor(scores["per_position"], dtype=torch.float64) * c
        count += c
        correct += scores["accuracy"] * float(c.sum())
        exact += round(scores["exact_match"] * scores["items"])
        items += scores["items"]
        if depth is not None:
            by_depth[depth] = {
                "exact_match": scores["exact_match"],
                "accuracy": scores["accuracy"],
                "items": scores["items"],
            }
    loss = float(loss_sum.sum() / count.sum())
    return {
        "loss": loss,
        "bpb": loss / math.log(2),
        "ppl": math.exp(min(loss, 700.0)),
        "accuracy": correct / float(count.sum()),
        "exact_match": exact / items,
        "items": items,
        "loss_sum": loss_sum,
        "count": count,
        "groups": by_depth,
    }


def buckets(loss_sum: torch.Tensor, count: torch.Tensor, n: int) -> list[tuple[int, int, float]]:
    """(start, end, mean loss) over ``n`` equal position buckets, scored targets only."""
    length = len(loss_sum)
    edges = torch.linspace(0, length, min(n, length) + 1).round().long().tolist()
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        c = float(count[a:b].sum())
        out.append((a, b, float(loss_sum[a:b].sum()) / c if c else float("nan")))
    return out


def finetune(model: torch.nn.Module, setup: Setup, length: int, steps: int, on_log: Callable | None) -> None:
    """``steps`` steps at ``length`` with as many tokens per batch as in training, at the final
    learning rate of the training schedule (constant, no warmup)."""
    t = setup.train
    cfg = dataclasses.replace(
        t,
        steps=steps,
        seq_len=length,
        batch_size=max(1, t.batch_size * t.seq_len // length),
        lr=t.lr * t.min_lr_ratio,
        min_lr_ratio=1.0,
        warmup_steps=0,
        log_every=max(1, steps // 10),
        eval_every=steps,
        checkpoint_every=steps,
    )
    train(model, lambda b, g: setup.task.train_batch(b, length, g), cfg, seed=setup.seed + 1, on_log=on_log)
