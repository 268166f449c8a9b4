"""A researcher's own sequence task: repeat the current token (the answer is the input)."""

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.base import SequenceTask


class Echo(SequenceTask):
    answer_only = True

    def __init__(self, vocab: int = 8, eval_size: int = 16) -> None:
        self.vocab_size, self.eval_size, self.name = vocab, eval_size, "echo"

    def check_length(self, seq_len: int, split: str = "train") -> None:
        if seq_len < 1:
            raise ConfigError(f"sequence length must be >= 1, got {seq_len}")

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator):
        x = torch.randint(0, self.vocab_size, (batch_size, size), generator=generator)
        return x, x.clone()

    def eval_set(self, size: int, max_items: int | None = None, split: str = "val"):
        """Validation and test sequences from streams of their own (seeds 0 and 1)."""
        n = self.eval_size if max_items is None else min(self.eval_size, max_items)
        return self.train_batch(n, size, torch.Generator().manual_seed(0 if split == "val" else 1))
