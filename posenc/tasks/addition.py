"""Addition: ``a₁ … a_k + b₁ … b_k = c₀ c₁ … c_k``, digits most significant first; the sum is the answer.

Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length Generalization in
Transformers"; reference implementation McGill-NLP/length-generalization, its ``s2s_addition``
instance processor) write "Compute a + b ?" and then "The answer is" and the sum, one token per
digit, operands and sum most significant digit first, as people write them: the sum is not
reversed, so its first digit depends on every carry. posenc keeps that digit order and draws both
operands with k digits (leading zeros allowed), so the sum has k+1 digits (a leading 0 when
nothing carries) and every instance of a length has the same layout; k grows with the sequence
length as the copy task's n does.
"""

from __future__ import annotations

import torch

from posenc.tasks.algorithmic import prompt_then_answer
from posenc.tasks.synthetic import SyntheticTask


def add_digits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(n, k) and (n, k) digits, most significant first -> (n, k+1) digits of their sum."""
    n, k = a.shape
    total = a + b  # (n, k) column sums 0..18
    out = torch.empty(n, k + 1, dtype=a.dtype)
    carry = torch.zeros(n, dtype=a.dtype)
    for i in range(k - 1, -1, -1):  # the least significant column first: carries run leftwards
        column = total[:, i] + carry
        out[:, i + 1], carry = column % 10, column // 10
    out[:, 0] = carry
    return out


class AdditionTask(SyntheticTask):
    """Digits 0-9 (token = digit), then PLUS, EQUALS and PAD; k = (seq_len - 2) // 3 digits per operand."""

    min_length = 5  # one-digit operands: a + b = c₀ c₁

    def __init__(self, seed: int = 0, eval_size: int = 64) -> None:
        super().__init__(seed, eval_size)
        self.plus, self.equals, self.pad = 10, 11, 12
        self.vocab_size = 13
        self.name = "addition"

    def digits(self, seq_len: int) -> int:
        """k digits per operand: 3k + 3 tokens (two operands, two signs, a (k+1)-digit sum) fit in s+1."""
        return (seq_len - 2) // 3

    def sample(self, n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.digits(seq_len)
        a, b = torch.randint(0, 10, (2, n, k), generator=generator)
        prompt = torch.cat((a, torch.full((n, 1), self.plus), b, torch.full((n, 1), self.equals)), dim=1)  # (n, 2k+2)
        return prompt_then_answer(prompt, add_digits(a, b), seq_len, self.pad)
