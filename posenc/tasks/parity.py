"""Parity: ``b₁ … bₙ ?`` then 1 if the number of ones is odd, else 0; one token, the answer.

Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length Generalization in
Transformers"; reference implementation McGill-NLP/length-generalization, its ``s2s_parity``
instance processor) list bits and ask whether the number of ones is even, answered Yes or No.
posenc keeps the bits, one query token and the parity bit as the answer (0: even, the paper's
"Yes"; 1: odd, its "No"), with n = seq_len - 1 bits: summation (``posenc.tasks.summation``) in
base 2. Uniform bits are odd and even with probability 1/2 each, so guessing scores
``chance_accuracy`` = 0.5 per sequence.
"""

from __future__ import annotations

from typing import ClassVar

from posenc.tasks.summation import SummationTask


class ParityTask(SummationTask):
    """Bits 0 and 1, then the query token (2); n = seq_len - 1 bits and their parity."""

    base: ClassVar[int] = 2
    chance_accuracy: ClassVar[float] = 1 / base  # odd and even are equally likely

    def __init__(self, seed: int = 0, eval_size: int = 64) -> None:
        super().__init__(seed, eval_size)
        self.name = "parity"
