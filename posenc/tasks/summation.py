"""Summation: ``d₁ … dₙ =`` then (d₁ + … + dₙ) mod 10, one token; the residue is the answer.

Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length Generalization in
Transformers"; reference implementation McGill-NLP/length-generalization, its ``s2s_sum``
instance processor with ``modulo_factor: 10``) write single digits joined by "+" and expect their
sum modulo 10. posenc drops the "+" (it carries no information) and keeps n = seq_len - 1 digits.
The residue of uniform digits is uniform, so guessing scores ``chance_accuracy`` = 1/10 per
sequence. Parity (``posenc.tasks.parity``) is the same task in base 2.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from posenc.tasks.algorithmic import prompt_then_answer
from posenc.tasks.synthetic import SyntheticTask


class SummationTask(SyntheticTask):
    """Digits 0..base-1 (token = digit), then the query token; n = seq_len - 1 digits and their sum mod base."""

    base: ClassVar[int] = 10
    min_length = 2  # one digit, the query, its residue
    chance_accuracy: ClassVar[float] = 1 / base  # the residue of uniform digits is uniform

    def __init__(self, seed: int = 0, eval_size: int = 64) -> None:
        super().__init__(seed, eval_size)
        self.query = self.base
        self.vocab_size = self.base + 1
        self.name = "summation"

    def sample(self, n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(0, self.base, (n, seq_len - 1), generator=generator)
        prompt = torch.cat((x, torch.full((n, 1), self.query)), dim=1)  # (n, s): no room left for PAD
        return prompt_then_answer(prompt, x.sum(1, keepdim=True) % self.base, seq_len, self.query)
