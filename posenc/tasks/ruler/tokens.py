"""RULER's retrieval tasks on integer tokens, for posenc's tiny LMs: a needle in repeated filler
(niah_single_1) and among needles of other keys (multi-key), asked for at the end.

``… f₀ f₁ … f_{m-1} f₀ … NEEDLE key d₁…d_k … NEEDLE key' d'₁…d'_k … QUERY key d₁…d_k``: the
filler is one sentence of ``n_filler`` tokens repeated, as RULER's noise haystack; the asked
needle sits at a depth of the filler, the ``keys - 1`` distractors at uniform places; the last
k digits are the answer. Scored as passkey is (``posenc extrapolate``): exact match of the whole
value by (length, depth), per-digit accuracy beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.passkey import PasskeyTask


class NeedleTokenTask(PasskeyTask):
    """Digits 0-9, ``n_keys`` key tokens, ``n_filler`` filler tokens, NEEDLE and QUERY markers."""

    def __init__(
        self,
        keys: int = 1,
        n_keys: int = 16,
        key_length: int = 5,
        n_filler: int = 8,
        depths: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
        seed: int = 0,
        eval_size: int = 64,
        trials: int = 64,
    ) -> None:
        super().__init__(key_length, n_filler, depths, seed, eval_size, trials)
        if not 1 <= keys <= n_keys:
            raise ConfigError(f"task.keys must be in 1..task.n_keys (needles of distinct keys), got {keys}, {n_keys}")
        self.keys, self.n_keys = keys, n_keys
        self.key, self.query = 10 + n_keys + n_filler, 11 + n_keys + n_filler  # NEEDLE, QUERY markers
        self.vocab_size = 12 + n_keys + n_filler
        self.block = key_length + 2  # NEEDLE key d₁…d_k (and QUERY key d₁…d_k)
        self.min_length = (keys + 1) * self.block - 1
        self.name = "ruler_niah_single" if keys == 1 else f"ruler_niah_multikey_{keys}"

    def sample(
        self, n: int, seq_len: int, generator: torch.Generator, depth: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        k, b, n_fill = self.key_length, self.block, seq_len + 1 - (self.keys + 1) * self.block
        if depth is None:
            depth = torch.rand(n, generator=generator)
        keys = torch.rand(n, self.n_keys, generator=generator).argsort(dim=1)[:, : self.keys]  # (n, K) distinct
        digits = torch.randint(0, 10, (n, self.keys, k), generator=generator)  # (n, K, k)
        blocks = torch.cat(
            (torch.full((n, self.keys, 1), self.key), 10 + keys[..., None], digits), dim=2
        )  # (n, K, b): the asked needle first
        # each needle's place in the filler: the asked one at its depth, distractors uniform
        places = torch.randint(0, n_fill + 1, (n, self.keys), generator=generator)
        places[:, 0] = (depth * n_fill).round().long()
        order = places.argsort(dim=1, stable=True)  # (n, K): needles in the order they sit
        # a needle's first token: its place plus the needles before it
        starts = torch.empty_like(places)
        starts.scatter_(1, order, places.gather(1, order) + b * torch.arange(self.keys))
        is_needle = torch.zeros(n, seq_len + 1 - b, dtype=torch.bool)
        cols = (starts[..., None] + torch.arange(b)).reshape(n, -1)  # (n, K·b)
        is_needle.scatter_(1, cols, True)
        filler = 10 + self.n_keys + (is_needle.logical_not().cumsum(dim=1) - 1) % self.n_filler  # the repeated sentence
        body = filler.scatter(1, cols, blocks.reshape(n, -1))  # (n, s+1-b)
        tail = torch.cat((torch.full((n, 1), self.query), blocks[:, 0, 1:]), dim=1)  # QUERY key d₁…d_k
        tokens = torch.cat((body, tail), dim=1)  # (n, s+1)
        mask = torch.zeros_like(tokens, dtype=torch.bool)
        mask[:, -k:] = True
        return tokens, mask

    def describe(self) -> dict[str, object]:
        return {"task": self.name, "keys": self.keys, "key_length": self.key_length}
