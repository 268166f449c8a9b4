"""Multi-query associative recall: ``k v k v …`` pairs drawn from a per-sequence key -> value map.

Every value whose key appeared earlier in the sequence is an answer (recall needs the earlier
pair, at any distance); first occurrences are not scored. The dense form of associative recall
of Arora et al. 2023 ("Zoology", MQAR) that gives a training signal at every length.
"""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.synthetic import SyntheticTask


class AssocRecallTask(SyntheticTask):
    """Keys 0..n_keys-1, values n_keys..n_keys+n_values-1, then PAD; seq_len // 2 pairs or so."""

    min_length = 3

    def __init__(self, n_keys: int = 16, n_values: int = 16, seed: int = 0, eval_size: int = 64) -> None:
        super().__init__(seed, eval_size)
        if n_keys < 1 or n_values < 2:
            raise ConfigError(f"task.n_keys must be >= 1 and task.n_values >= 2, got {n_keys}, {n_values}")
        self.n_keys, self.n_values = n_keys, n_values
        self.pad = n_keys + n_values
        self.vocab_size = n_keys + n_values + 1
        self.name = "assoc_recall"

    def sample(self, n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        pairs = (seq_len + 1) // 2
        table = torch.randint(0, self.n_values, (n, self.n_keys), generator=generator)  # key -> value
        keys = torch.randint(0, self.n_keys, (n, pairs), generator=generator)
        values = table.gather(1, keys) + self.n_keys
        seen = torch.nn.functional.one_hot(keys, self.n_keys).cumsum(1).gather(2, keys[..., None])[..., 0] > 1
        tokens = torch.stack((keys, values), dim=2).flatten(1)  # (n, 2·pairs)
        mask = torch.stack((torch.zeros_like(seen), seen), dim=2).flatten(1)
        if tokens.shape[1] < seq_len + 1:  # odd total: one PAD in front
            tokens = torch.cat((torch.full((n, 1), self.pad), tokens), dim=1)
            mask = torch.cat((torch.zeros(n, 1, dtype=torch.bool), mask), dim=1)
        return tokens, mask
