"""What every synthetic sequence task shares: generated from a seed at any length, scored on
its answer only.

A task draws whole token sequences (n, s+1) and a mask of the answer tokens; the LM inputs are
the first s tokens and the targets the next tokens, with ``IGNORE_INDEX`` wherever the target is
not an answer, so ``posenc.engine.evaluation.evaluate`` reports answer accuracy. Validation and
test windows come from generators seeded by the task's seed, the length and the split, apart from
each other and from the training stream: the same length always gives the same windows, whatever
was trained before.
"""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.base import IGNORE_INDEX, SPLITS, EvalSplit, SequenceTask, stream_seed


def lm_pairs(tokens: torch.Tensor, answer: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, s+1) tokens and answer mask -> (n, s) inputs and (n, s) targets scored on answers."""
    targets = tokens[:, 1:].masked_fill(~answer[:, 1:], IGNORE_INDEX)
    return tokens[:, :-1], targets


class SyntheticTask(SequenceTask):
    """Base of the generated tasks; a subclass sets ``vocab_size``, ``min_length`` and ``sample``."""

    answer_only = True  # experiments report accuracy on answers, not bits per byte
    vocab_size: int
    min_length: int

    def __init__(self, seed: int = 0, eval_size: int = 64) -> None:
        if eval_size < 1:
            raise ConfigError(f"task.eval_size must be >= 1, got {eval_size}")
        self.seed, self.eval_size = seed, eval_size
        self.name = type(self).__name__

    def sample(self, n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, seq_len + 1) tokens and the bool mask of the answer tokens."""
        raise NotImplementedError

    def check_length(self, seq_len: int, split: str = "train") -> None:
        """Any length from ``min_length`` on: sequences are generated, never read from a split."""
        if seq_len < self.min_length:
            raise ConfigError(
                f"sequence length {seq_len} is too short for task {self.name}; it needs >= {self.min_length}"
            )

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return lm_pairs(*self.sample(batch_size, size, generator))

    def eval_generator(self, seq_len: int, split: EvalSplit = "val", *cell: float) -> torch.Generator:
        """The seed stream of ``split`` at ``seq_len`` (and of a ``cell`` within it, a depth):
        validation at seed 1_000_003·(seed + 1) + length as always; test, and every cell, at a
        hash of (task, seed, split, length, cell), so no two share a stream. Training batches come
        from the run's own generator."""
        if split not in SPLITS:
            raise ValueError(f"split '{split}' is not one of: {', '.join(SPLITS)}")
        if split == "val" and not cell:
            return torch.Generator().manual_seed(1_000_003 * (self.seed + 1) + seq_len)
        return torch.Generator().manual_seed(stream_seed(self.name, self.seed, split, seq_len, *cell))

    def eval_set(
        self, size: int, max_items: int | None = None, split: EvalSplit = "val"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``eval_size`` (at most ``max_items``) fixed sequences of ``split`` at ``size`` tokens."""
        n = self.eval_size if max_items is None else min(self.eval_size, max_items)
        return lm_pairs(*self.sample(n, size, self.eval_generator(size, split)))
