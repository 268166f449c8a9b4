"""Passkey retrieval: a numeric key hidden in filler at a chosen depth, asked for at the end.

``filler … KEY d₁…d_k filler … QUERY d₁…d_k``: the last k digits are the answer. Mohtashami &
Jaggi 2023 ("Landmark Attention") and the YaRN paper report accuracy by length and by the depth
of the key (0: at the start, 1: just before the question).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.base import EvalSplit
from posenc.tasks.synthetic import SyntheticTask, lm_pairs


class PasskeyTask(SyntheticTask):
    """Digits 0-9, filler tokens, KEY and QUERY markers. Training depths are uniform in [0, 1];
    validation cycles through ``depths`` (``eval_set(…, depth=d)`` for one depth).

    Scored as retrieval (``posenc extrapolate``): ``trials`` independent sequences at every
    (length, depth), whatever the length; exact match of the whole key is the primary score
    (chance 10⁻ᵏ), per-digit accuracy the secondary one (chance 1/10)."""

    def __init__(
        self,
        key_length: int = 5,
        n_filler: int = 8,
        depths: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
        seed: int = 0,
        eval_size: int = 64,
        trials: int = 64,
    ) -> None:
        super().__init__(seed, eval_size)
        if trials < 1:
            raise ConfigError(f"task.trials must be >= 1 (sequences per length and depth), got {trials}")
        self.trials = trials
        if key_length < 1 or n_filler < 1:
            raise ConfigError(f"task.key_length and task.n_filler must be >= 1, got {key_length}, {n_filler}")
        if not depths or any(not 0.0 <= d <= 1.0 for d in depths):
            raise ConfigError(f"task.depths must be a non-empty list of numbers in [0, 1], got {list(depths)}")
        self.key_length, self.n_filler, self.depths = key_length, n_filler, tuple(float(d) for d in depths)
        self.key, self.query = 10 + n_filler, 11 + n_filler
        self.vocab_size = 12 + n_filler
        self.min_length = 2 * key_length + 1
        self.name = "passkey"

    def key_start(self, seq_len: int, depth: torch.Tensor) -> torch.Tensor:
        """Index of the KEY marker for (n,) depths: depth · (number of filler tokens)."""
        n_fill = seq_len + 1 - 2 * (self.key_length + 1)
        return (depth * n_fill).round().long()

    def sample(
        self, n: int, seq_len: int, generator: torch.Generator, depth: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.key_length
        if depth is None:
            depth = torch.rand(n, generator=generator)
        digits = torch.randint(0, 10, (n, k), generator=generator)
        tokens = torch.randint(10, 10 + self.n_filler, (n, seq_len + 1), generator=generator)
        start = self.key_start(seq_len, depth)  # (n,)
        block = torch.cat((torch.full((n, 1), self.key), digits), dim=1)  # (n, k+1)
        cols = start[:, None] + torch.arange(k + 1)  # (n, k+1)
        tokens.scatter_(1, cols, block)
        tokens[:, -(k + 1) :] = torch.cat((torch.full((n, 1), self.query), digits), dim=1)
        mask = torch.zeros_like(tokens, dtype=torch.bool)
        mask[:, -k:] = True
        return tokens, mask

    def eval_set(
        self, size: int, max_items: int | None = None, split: EvalSplit = "val", depth: float | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Fixed sequences of ``split``; window i at ``depths[i % len(depths)]`` unless ``depth`` is given."""
        n = self.eval_size if max_items is None else min(self.eval_size, max_items)
        depths = self.window_depths(n) if depth is None else torch.full((n,), float(depth))
        return lm_pairs(*self.sample(n, size, self.eval_generator(size, split), depth=depths))

    def retrieval_set(self, size: int, split: EvalSplit = "test") -> tuple[torch.Tensor, torch.Tensor]:
        """``trials`` sequences at every depth of ``depths`` (depth-major): (trials·D, s) inputs and
        targets; ``window_depths`` of the same count gives each row's depth. Each (length, depth)
        cell has its own stream, so a cell's sequences do not change when depths are added."""
        parts = [
            lm_pairs(
                *self.sample(
                    self.trials,
                    size,
                    self.eval_generator(size, split, d),
                    depth=torch.full((self.trials,), d),
                )
            )
            for d in self.depths
        ]
        return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])

    def retrieval_depths(self) -> torch.Tensor:
        """(trials·D,) depth of each row of ``retrieval_set``."""
        return torch.tensor(self.depths).repeat_interleave(self.trials)

    def chance(self) -> dict[str, float]:
        """What guessing digits scores: 1/10 a digit, 10⁻ᵏ a whole key."""
        return {"accuracy": 0.1, "exact_match": 0.1**self.key_length}

    def window_depths(self, n: int) -> torch.Tensor:
        """(n,) depth of each of n validation windows: ``depths`` in turn."""
        return torch.tensor(self.depths)[torch.arange(n) % len(self.depths)]
