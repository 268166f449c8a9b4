"""The one evaluation loop: loss, bits, perplexity, accuracy and per-position loss of an LM.

Targets equal to ``IGNORE_INDEX`` are not scored, so tasks that grade only an answer span
(copy, passkey) share this loop with plain text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from posenc.errors import ConfigError

IGNORE_INDEX = -100


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
def evaluate_lm(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
    positions: torch.Tensor | None = None,
) -> dict[str, float | list[float]]:
    """Score (n, s) windows. Returns mean loss (nats), bits, perplexity, accuracy and the mean
    loss at every position (``per_position``, length s)."""
    was_training = model.training
    model.eval()
    s = inputs.shape[1]
    loss_sum = torch.zeros(s, dtype=torch.float64)
    count = torch.zeros(s, dtype=torch.float64)
    correct = 0
    for i in range(0, len(inputs), batch_size):
        x = inputs[i : i + batch_size].to(device)
        y = targets[i : i + batch_size].to(device)
        logits = model(x, positions)  # (b, s, V)
        loss = F.cross_entropy(logits.float().transpose(1, 2), y, ignore_index=IGNORE_INDEX, reduction="none")
        mask = y != IGNORE_INDEX  # (b, s)
        loss_sum += loss.sum(0).double().cpu()
        count += mask.sum(0).double().cpu()
        correct += int(((logits.argmax(-1) == y) & mask).sum())
    model.train(was_training)
    total = float(count.sum())
    if total == 0:
        raise ConfigError("nothing to evaluate: no scored targets in the evaluation windows")
    mean = float(loss_sum.sum()) / total
    per_position = (loss_sum / count.clamp(min=1)).tolist()
    return {
        "loss": mean,
        "bits": mean / math.log(2),
        "ppl": math.exp(min(mean, 700.0)),
        "accuracy": correct / total,
        "per_position": per_position,
    }
