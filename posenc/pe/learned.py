"""Learned absolute position table (GPT-2, BERT, the original ViT).

A table of ``max_len`` rows is trained; a position past it has no row (seed claim C3), so by
default it is an error, never a silent wrap.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.pe.base import PositionScheme
from posenc.pe.resample import MODES


class LearnedPE(PositionScheme):
    """``max_len`` x ``dim`` table added to the input, initialised N(0, ``init_std``²)."""

    adds_embedding = True
    encodes = "absolute"
    counterpart = "learned2d"
    grid_methods = MODES  # on the ViT: a table over the raster order, resampled like a grid

    def __init__(
        self, dim: int, max_len: int, init_std: float = 0.02, randomized: bool = False, randomized_max: int = 2048
    ) -> None:
        super().__init__()
        self.max_positions = max_len
        self.table = nn.Parameter(torch.randn(max_len, dim) * init_std)
        self.set_randomized(randomized, randomized_max)  # the table must cover randomized_max

    def embedding(self, positions: torch.Tensor) -> torch.Tensor:
        self.check_positions(positions)
        return self.table[positions]  # (..., s, d)
