"""Learned row and column tables for patch grids (factorized 2D embedding).

Patch (r, c) gets row[r] + col[c], the "2-dimensional embedding" variant of the ViT paper's
position ablation (Dosovitskiy et al. 2021, Appendix D.4), which takes H + W rows instead of H·W.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.pe.base import PositionOutOfRange, PositionScheme
from posenc.pe.resample import MODES, resample_grid


class LearnedPE2D(PositionScheme):
    """``grid`` x ``dim`` row table plus ``grid`` x ``dim`` column table, added to the patches."""

    adds_embedding = True
    encodes = "absolute"
    counterpart = "learned"
    ndim = 2
    grid_methods = MODES

    def __init__(self, dim: int, grid: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.rows = nn.Parameter(torch.randn(grid, dim) * init_std)
        self.cols = nn.Parameter(torch.randn(grid, dim) * init_std)

    @property
    def grid(self) -> tuple[int, int]:
        return self.rows.shape[0], self.cols.shape[0]

    def embedding(self, positions: torch.Tensor) -> torch.Tensor:
        """(…, s, 2) integer (row, col) -> (…, s, d)."""
        if positions.is_floating_point():
            raise PositionOutOfRange("learned2d looks up integer (row, col); resample its tables instead")
        r, c = positions[..., 0], positions[..., 1]
        if positions.numel() and (int(r.max()) >= self.grid[0] or int(c.max()) >= self.grid[1]):
            raise PositionOutOfRange(
                f"patch ({int(r.max())}, {int(c.max())}) is past the learned2d grid {self.grid[0]}x{self.grid[1]}; "
                "resample the tables to the new grid"
            )
        return self.rows[r] + self.cols[c]  # (…, s, d)

    @torch.no_grad()
    def resample_(self, new_grid: tuple[int, int], mode: str = "bicubic", antialias: bool = False) -> None:
        """Interpolate both tables to ``new_grid`` in place (each as an H x 1 grid)."""
        (h, w), (nh, nw) = self.grid, new_grid
        self.rows = nn.Parameter(resample_grid(self.rows, (nh, 1), old_grid=(h, 1), num_prefix_tokens=0,
                                               mode=mode, antialias=antialias))
        self.cols = nn.Parameter(resample_grid(self.cols, (nw, 1), old_grid=(w, 1), num_prefix_tokens=0,
                                               mode=mode, antialias=antialias))
