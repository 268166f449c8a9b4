"""RULER's retrieval tasks on integer tokens, for posenc's tiny LMs: a needle in repeated filler
(niah_single_1), among needles of other keys (multi-key), several values of the key asked
(multi-value) and several keys asked (multi-query), asked for at the end.

``… f₀ f₁ … f_{m-1} f₀ … NEEDLE key d₁…d_k … NEEDLE key' d'₁…d'_k … QUERY key d₁…d_k``: the
filler is one sentence of ``n_filler`` tokens repeated, as RULER's noise haystack; ``keys`` keys
have ``values`` needles each; the first value of the first key asked sits at a depth of the
filler, every other needle at a uniform place. The question is ``QUERY key`` and the digits of
each of the key's values in the order they occur, for each of the ``queries`` keys asked; those
digits are the answer. Scored as passkey is (``posenc extrapolate``): exact match of the whole
answer by (length, depth), per-digit accuracy beside it.
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
        values: int = 1,
        queries: int = 1,
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
        if values < 1 or not 1 <= queries <= keys:
            raise ConfigError(f"task.values must be >= 1 and task.queries in 1..task.keys, got {values}, {queries}")
        self.keys, self.values, self.queries, self.n_keys = keys, values, queries, n_keys
        self.key, self.query = 10 + n_keys + n_filler, 11 + n_keys + n_filler  # NEEDLE, QUERY markers
        self.vocab_size = 12 + n_keys + n_filler
        self.block = key_length + 2  # NEEDLE key d₁…d_k
        self.asked = 2 + values * key_length  # QUERY key and the digits of the key's values
        self.min_length = keys * values * self.block + queries * self.asked - 1
        self.name = "ruler_niah_single" if keys == 1 else f"ruler_niah_multikey_{keys}"
        if values > 1 or queries > 1:  # as the prompt tasks are named (NeedleTask): niah_2k_2q
            counts = ((keys, "k"), (values, "v"), (queries, "q"))
            self.name = "ruler_niah" + "".join(f"_{n}{part}" for n, part in counts if n > 1)

    def sample(
        self, n: int, seq_len: int, generator: torch.Generator, depth: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        k, b, v, q = self.key_length, self.block, self.values, self.queries
        needles = self.keys * v  # needle j holds value j % v of key j // v
        n_fill = seq_len + 1 - needles * b - q * self.asked
        if depth is None:
            depth = torch.rand(n, generator=generator)
        keys = torch.rand(n, self.n_keys, generator=generator).argsort(dim=1)[:, : self.keys]  # (n, K) distinct
        digits = torch.randint(0, 10, (n, needles, k), generator=generator)  # (n, N, k)
        blocks = torch.cat(
            (torch.full((n, needles, 1), self.key), 10 + keys.repeat_interleave(v, dim=1)[..., None], digits), dim=2
        )  # (n, N, b): the first asked key's needles first
        # each needle's place in the filler: the first asked one at its depth, the rest uniform
        places = torch.randint(0, n_fill + 1, (n, needles), generator=generator)
        places[:, 0] = (depth * n_fill).round().long()
        order = places.argsort(dim=1, stable=True)  # (n, N): needles in the order they sit
        # a needle's first token: its place plus the needles before it
        starts = torch.empty_like(places)
        starts.scatter_(1, order, places.gather(1, order) + b * torch.arange(needles))
        is_needle = torch.zeros(n, seq_len + 1 - q * self.asked, dtype=torch.bool)
        cols = (starts[..., None] + torch.arange(b)).reshape(n, -1)  # (n, N·b)
        is_needle.scatter_(1, cols, True)
        filler = 10 + self.n_keys + (is_needle.logical_not().cumsum(dim=1) - 1) % self.n_filler  # the repeated sentence
        body = filler.scatter(1, cols, blocks.reshape(n, -1))  # (n, s+1-Q·asked)
        # the keys asked are the first Q; a key's values in the order they sit (by start)
        mine = starts[:, : q * v].reshape(n, q, v).argsort(dim=2)  # (n, Q, V)
        asked = digits[:, : q * v].reshape(n, q, v, k)  # (n, Q, V, k)
        answers = asked.gather(2, mine[..., None].expand(-1, -1, -1, k))  # (n, Q, V, k) in context order
        tail = torch.cat(
            (torch.full((n, q, 1), self.query), 10 + keys[:, :q, None], answers.reshape(n, q, v * k)), dim=2
        )  # (n, Q, asked): QUERY key d₁…d_k d'₁…d'_k …
        tokens = torch.cat((body, tail.reshape(n, -1)), dim=1)  # (n, s+1)
        mask = torch.zeros(n, q, self.asked, dtype=torch.bool)
        mask[..., 2:] = True
        mask = torch.cat((torch.zeros_like(body, dtype=torch.bool), mask.reshape(n, -1)), dim=1)
        return tokens, mask

    def chance(self) -> dict[str, float]:
        """What guessing digits scores: 1/10 a digit, 10⁻ᵐ a whole answer of m digits."""
        return {"accuracy": 0.1, "exact_match": 0.1 ** (self.queries * self.values * self.key_length)}

    def describe(self) -> dict[str, object]:
        several = {name: n for name, n in (("values", self.values), ("queries", self.queries)) if n > 1}
        return {"task": self.name, "keys": self.keys, **several, "key_length": self.key_length}
