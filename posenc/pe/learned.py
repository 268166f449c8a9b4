"""Learned absolute position table (GPT-2, BERT, the original ViT).

A table of ``max_len`` rows is trained; a position past it has no row (seed claim C3), so by
default it is an error, never a silent wrap. The table changes only through its own methods:
``resample_`` for a longer sequence, ``resample_grid_`` for another patch grid (on the ViT the
rows are [prefix rows, patches in raster order]); both call ``posenc.pe.resample``.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.pe.base import PositionScheme
from posenc.pe.resample import MODES, Mode, as_grid, resample_grid, resample_table


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

    @torch.no_grad()
    def resample_(self, length: int, mode: str = "linear") -> None:
        """Serve ``length`` positions in place: the table clamped or interpolated (``resample_table``);
        nothing changes when the table already covers them."""
        table = resample_table(self.table.data, length, mode)  # (max(n, length), d)
        if table.shape[0] != self.table.shape[0]:
            self._replace(table)

    @torch.no_grad()
    def resample_grid_(
        self,
        new_grid: tuple[int, int],
        *,
        old_grid: tuple[int, int],
        num_prefix_tokens: int = 1,
        mode: Mode = "bicubic",
        antialias: bool | None = None,
    ) -> None:
        """Read rows [prefix, h·w patches in raster order] as an ``old_grid`` and resample them to
        ``new_grid`` in place (``resample_grid``; rows past them are dropped); the same grid changes nothing."""
        if as_grid(new_grid) == as_grid(old_grid):
            return
        used = self.table.data[: num_prefix_tokens + old_grid[0] * old_grid[1]]  # (prefix + h·w, d)
        self._replace(
            resample_grid(
                used, new_grid, old_grid=old_grid, num_prefix_tokens=num_prefix_tokens, mode=mode, antialias=antialias
            )
        )

    def _replace(self, table: torch.Tensor) -> None:
        self.table = nn.Parameter(table)
        self.max_positions = table.shape[0]
