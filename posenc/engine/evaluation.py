"""The one evaluation loop: loss, bits, perplexity, accuracy (and per-position loss for LMs).

Targets equal to ``IGNORE_INDEX`` are not scored, so tasks that grade only an answer span
(copy, passkey) share this loop with plain text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from posenc.core.errors import ConfigError
from posenc.tasks.base import IGNORE_INDEX


@dataclass
class EvalConfig:
    """How evaluation batches windows; ``max_windows`` caps the final evaluation (None: all)."""

    batch_size: int = 16
    max_windows: int | None = None
    periodic_windows: int = 32

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"eval.batch_size must be >= 1, got {self.batch_size}")
        if self.max_windows is not None and self.max_windows < 1:
            raise ConfigError(f"eval.max_windows must be >= 1 or null, got {self.max_windows}")
        if self.periodic_windows < 1:
            raise ConfigError(f"eval.periodic_windows must be >= 1, got {self.periodic_windows}")


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
    positions: torch.Tensor | None = None,
) -> dict[str, float | list[float]]:
    """Score ``inputs`` against ``targets`` in batches.

    A language model gives (b, s, V) logits for (n, s) targets; a classifier (b, C) logits for
    (n,) targets. Returns the mean loss (nats) over scored targets, the same in bits, perplexity,
    accuracy (of scored targets), ``exact_match`` (the fraction of items whose scored targets
    are all right: for an answer span scored under teacher forcing this equals greedy decoding's
    exact match, since a greedy decode that has been right so far sees the teacher's prefix),
    ``items`` (the inputs with at least one scored target), and for sequences the mean loss at
    every position (``per_position``, length s).
    """
    was_training = model.training
    model.eval()
    shape = targets.shape[1:]  # (s,) for sequences, () for one label per input
    loss_sum = torch.zeros(shape, dtype=torch.float64)
    count = torch.zeros(shape, dtype=torch.float64)
    correct = 0
    exact, items = 0, 0
    for i in range(0, len(inputs), batch_size):
        x = inputs[i : i + batch_size].to(device)
        y = targets[i : i + batch_size].to(device)
        logits = model(x) if positions is None else model(x, positions)  # (b, s, V) or (b, C)
        loss = F.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=IGNORE_INDEX, reduction="none"
        ).view(y.shape)
        mask = y != IGNORE_INDEX
        loss_sum += (loss * mask).sum(0).double().cpu()
        count += mask.sum(0).double().cpu()
        right = logits.argmax(-1) == y
        correct += int((right & mask).sum())
        scored = mask.reshape(len(y), -1).any(1)  # (b,) items with a scored target
        items += int(scored.sum())
        exact += int(((right | ~mask).reshape(len(y), -1).all(1) & scored).sum())
    model.train(was_training)
    total = float(count.sum())
    if total == 0:
        raise ConfigError("nothing to evaluate: no scored targets in the evaluation data")
    mean = float(loss_sum.sum()) / total
    scores: dict[str, float | list[float]] = {
        "loss": mean,
        "bits": mean / math.log(2),
        "ppl": math.exp(min(mean, 700.0)),
        "accuracy": correct / total,
        "exact_match": exact / items,
        "items": items,
    }
    if loss_sum.dim():
        scores["per_position"] = (loss_sum / count.clamp(min=1)).tolist()
    return scores
