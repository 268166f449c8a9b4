"""Clipped relative position bias: one learned scalar per head and clipped distance.

Shaw et al. 2018, "Self-Attention with Relative Position Representations" (arXiv:1803.02155)
learn a vector per clipped distance clip(i − j, −K, K); the scalar-per-head form used here is
the bias variant of the same idea (as in Swin's relative position bias table,
``timm/layers/pos_embed_rel.py``): b_h(clip(i − j, −K, K)) is added to the attention scores.
Every distance past K shares the last entry, so the bias is defined at any length (seed claim C8).
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme, relative_distance, toeplitz_distances


def clipped_distance(q_positions: torch.Tensor, k_positions: torch.Tensor, max_distance: int) -> torch.Tensor:
    """(…, s_q, s_k) integer distances clip(i − j, −K, K) shifted to table rows 0..2K."""
    return clipped_rows(relative_distance(q_positions, k_positions), max_distance)


def clipped_rows(distance: torch.Tensor, max_distance: int) -> torch.Tensor:
    """Distances i − j of any shape -> table rows clip(i − j, −K, K) + K, 0..2K."""
    return distance.round().long().clamp(-max_distance, max_distance) + max_distance


class RelativeBiasPE(PositionScheme):
    """A (2K+1, n_h) table of biases indexed by the clipped distance, initialised N(0, ``init_std``²)."""

    adds_bias = True
    encodes = "relative"
    counterpart = "rel2d"

    def __init__(
        self,
        n_heads: int,
        max_distance: int = 32,
        init_std: float = 0.02,
        randomized: bool = False,
        randomized_max: int = 2048,
    ) -> None:
        super().__init__()
        if max_distance < 0:
            raise ConfigError(f"pe.max_distance must be >= 0, got {max_distance}")
        self.max_distance = max_distance
        self.table = nn.Parameter(torch.randn(2 * max_distance + 1, n_heads) * init_std)
        self.set_randomized(randomized, randomized_max)

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        rows = clipped_distance(q_positions, k_positions, self.max_distance)  # (…, s_q, s_k)
        return self.table[rows].movedim(-1, -3)  # (…, n_h, s_q, s_k)

    def distance_bias(self, positions: torch.Tensor) -> torch.Tensor | None:
        distance = toeplitz_distances(positions)  # (2s − 1,)
        return None if distance is None else self.table[clipped_rows(distance, self.max_distance)].T  # (n_h, 2s − 1)
