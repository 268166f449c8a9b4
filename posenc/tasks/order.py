"""Order task: the same tokens, a label that depends only on their order (人咬狗 / 狗咬人).

A sequence holds filler tokens, two distinct actors (the seed's 人 and 狗, drawn from
``n_actors``) at random places, and a query token at the end. The answer, scored at the query
position only, is the actor that comes first. Given the multiset of tokens both orders are
equally likely, so a model that cannot see order (bidirectional attention without positions)
is at ``chance_accuracy`` = 1/2 at best; anything above it read the order.

Same interface as ``posenc.tasks.text.TextTask``: an LM task whose targets are
``IGNORE_INDEX`` wherever nothing is scored, so ``posenc.engine.evaluation.evaluate`` reports the
answer accuracy.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.base import IGNORE_INDEX, EvalSplit, SequenceTask, stream_seed


class OrderTask(SequenceTask):
    """Who comes first: two actors among fillers, answer at the final query token.

    Vocabulary: fillers ``0..n_fillers-1``, actors ``n_fillers..n_fillers+n_actors-1``, then the
    query token. ``eval_size`` validation sequences are drawn from ``eval_seed`` and as many test
    sequences from a stream of their own, so every model is scored on the same ones.
    """

    order_labels: ClassVar[bool] = True  # labels depend only on order: `posenc order` uses it
    chance_accuracy: ClassVar[float] = 0.5  # both orders of a multiset are equally likely

    def __init__(self, n_fillers: int = 16, n_actors: int = 8, eval_size: int = 512, eval_seed: int = 1234) -> None:
        if n_fillers < 1:
            raise ConfigError(f"task.n_fillers must be >= 1, got {n_fillers}")
        if n_actors < 2:
            raise ConfigError(f"task.n_actors must be >= 2 (two actors per sequence), got {n_actors}")
        if eval_size < 1:
            raise ConfigError(f"task.eval_size must be >= 1, got {eval_size}")
        self.n_fillers, self.n_actors, self.eval_size, self.eval_seed = n_fillers, n_actors, eval_size, eval_seed
        self.query = n_fillers + n_actors
        self.vocab_size = n_fillers + n_actors + 1
        self.name = "order"

    def check_length(self, seq_len: int, split: str = "train") -> None:
        """Two actors and the query need at least three tokens; any length above works."""
        if seq_len < 3:
            raise ConfigError(f"the order task needs sequence length >= 3 (two actors and a query), got {seq_len}")

    def sample(self, n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, s) inputs and (n, s) targets, scored only at the last (query) position."""
        self.check_length(seq_len)
        x = torch.randint(0, self.n_fillers, (n, seq_len), generator=generator)
        first = torch.randint(0, self.n_actors, (n,), generator=generator)
        second = (first + torch.randint(1, self.n_actors, (n,), generator=generator)) % self.n_actors
        slots = torch.rand(n, seq_len - 1, generator=generator).argsort(-1)[:, :2]  # (n, 2) distinct places
        rows = torch.arange(n)
        x[rows, slots[:, 0]] = self.n_fillers + first
        x[rows, slots[:, 1]] = self.n_fillers + second
        x[:, -1] = self.query
        answer = torch.where(slots[:, 0] < slots[:, 1], first, second) + self.n_fillers
        y = torch.full_like(x, IGNORE_INDEX)
        y[:, -1] = answer
        return x, y

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return self.sample(batch_size, size, generator)

    def eval_set(
        self, size: int, max_items: int | None = None, split: EvalSplit = "val"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed set of ``split`` at ``size`` tokens (``eval_size`` sequences, or ``max_items`` if fewer)."""
        n = self.eval_size if max_items is None else min(self.eval_size, max_items)
        seed = self.eval_seed if split == "val" else stream_seed(self.name, self.eval_seed, split)
        return self.sample(n, size, torch.Generator().manual_seed(seed))

    def describe(self) -> dict[str, float | str]:
        return {"task": self.name, "vocab_size": self.vocab_size, "chance_accuracy": self.chance_accuracy}
