"""Sorting: ``x₁ … xₙ SEP`` then the same symbols in ascending order (repeats kept); the sorted list is the answer.

Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length Generalization in
Transformers"; reference implementation McGill-NLP/length-generalization, its
``s2s_sort_single_digit`` instance processor) give a list of one-token symbols and expect the
same list in ascending order, repeats kept. As in copy and reverse (``posenc.tasks.copy``),
n = seq_len // 2 symbols, so the problem grows with the sequence length.
"""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.algorithmic import prompt_then_answer
from posenc.tasks.synthetic import SyntheticTask


class SortingTask(SyntheticTask):
    """Symbols 0..n_symbols-1 (ordered by their id), then SEP and PAD; n = seq_len // 2 symbols."""

    min_length = 2

    def __init__(self, n_symbols: int = 16, seed: int = 0, eval_size: int = 64) -> None:
        super().__init__(seed, eval_size)
        if n_symbols < 2:
            raise ConfigError(f"task.n_symbols must be >= 2, got {n_symbols}")
        self.n_symbols = n_symbols
        self.sep, self.pad = n_symbols, n_symbols + 1
        self.vocab_size = n_symbols + 2
        self.name = "sorting"

    def sample(self, n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(0, self.n_symbols, (n, seq_len // 2), generator=generator)
        prompt = torch.cat((x, torch.full((n, 1), self.sep)), dim=1)  # (n, n_sym + 1)
        return prompt_then_answer(prompt, x.sort(dim=1).values, seq_len, self.pad)
