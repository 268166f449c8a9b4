"""Learned row and column tables for patch grids (factorized 2D embedding).

The "2-dimensional embedding" of the ViT paper's position ablation (Dosovitskiy et al. 2021,
Appendix D.4) learns an X and a Y embedding of D/2 each and concatenates them: patch (r, c) gets
[col[c], row[r]] (``combine="concat"``, the default). ``combine="sum"`` instead adds two
full-width tables, row[r] + col[c]. Either takes H + W rows instead of H·W.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionOutOfRange, PositionScheme
from posenc.pe.resample import MODES, resample_grid

COMBINE = ("concat", "sum")


class LearnedPE2D(PositionScheme):
    """A row and a column table, ``grid`` x ``dim``/2 concatenated or ``grid`` x ``dim`` summed,
    added to the patches."""

    adds_embedding = True
    encodes = "absolute"
    counterpart = "learned"
    ndim = 2
    grid_methods = MODES

    def __init__(self, dim: int, grid: int, init_std: float = 0.02, combine: str = "concat") -> None:
        super().__init__()
        if combine not in COMBINE:
            raise ConfigError(f"pe.combine '{combine}' is not a way to combine the tables; valid: {', '.join(COMBINE)}")
        if combine == "concat" and dim % 2:
            raise ConfigError(
                f"pe.combine=concat needs an even width (two tables of D/2), got {dim}; "
                "use pe.combine=sum or an even model.d_model"
            )
        self.combine = combine
        width = dim // 2 if combine == "concat" else dim
        self.rows = nn.Parameter(torch.randn(grid, width) * init_std)
        self.cols = nn.Parameter(torch.randn(grid, width) * init_std)

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
        if self.combine == "concat":
            return torch.cat((self.cols[c], self.rows[r]), dim=-1)  # (…, s, d): X then Y, D/2 each
        return self.rows[r] + self.cols[c]  # (…, s, d)

    @torch.no_grad()
    def resample_(self, new_grid: tuple[int, int], mode: str = "bicubic", antialias: bool | None = None) -> None:
        """Interpolate both tables to ``new_grid`` in place (each as an H x 1 grid)."""
        (h, w), (nh, nw) = self.grid, new_grid
        self.rows = nn.Parameter(
            resample_grid(self.rows, (nh, 1), old_grid=(h, 1), num_prefix_tokens=0, mode=mode, antialias=antialias)
        )
        self.cols = nn.Parameter(
            resample_grid(self.cols, (nw, 1), old_grid=(w, 1), num_prefix_tokens=0, mode=mode, antialias=antialias)
        )
