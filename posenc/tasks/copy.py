"""Copy and reverse: ``x₁ … xₙ SEP x₁ … xₙ`` (or ``xₙ … x₁``); the second half is the answer.

The length-generalisation probes of Kazemnejad et al. 2023 ("The Impact of Positional Encoding on
Length Generalization in Transformers"): a model trained on short strings must copy longer ones.
"""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.synthetic import SyntheticTask


class CopyTask(SyntheticTask):
    """Symbols 0..n_symbols-1, then SEP and PAD; n = seq_len // 2 symbols per sequence."""

    min_length = 2

    def __init__(self, n_symbols: int = 16, reverse: bool = False, seed: int = 0, eval_size: int = 64) -> None:
        super().__init__(seed, eval_size)
        if n_symbols < 2:
            raise ConfigError(f"task.n_symbols must be >= 2, got {n_symbols}")
        self.n_symbols, self.reverse = n_symbols, reverse
        self.sep, self.pad = n_symbols, n_symbols + 1
        self.vocab_size = n_symbols + 2
        self.name = "reverse" if reverse else "copy"

    def sample(self, n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        half = seq_len // 2
        x = torch.randint(0, self.n_symbols, (n, half), generator=generator)
        answer = x.flip(1) if self.reverse else x
        pad = torch.full((n, seq_len + 1 - (2 * half + 1)), self.pad)  # one PAD when seq_len is odd
        tokens = torch.cat((pad, x, torch.full((n, 1), self.sep), answer), dim=1)  # (n, s+1)
        mask = torch.zeros_like(tokens, dtype=torch.bool)
        mask[:, tokens.shape[1] - half :] = True
        return tokens, mask
