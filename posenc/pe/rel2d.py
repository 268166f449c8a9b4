"""Relative position bias on a patch grid (Swin: Liu et al. 2021, §3.2; Shaw et al. 2018 in 1D).

Each head learns a table of (2H−1)(2W−1) biases, one per (Δrow, Δcol) between two patches, so row
and column offsets are encoded apart (seed claim C8). At another grid the table is interpolated
(Swin's bicubic fine-tuning recipe) or the offsets are clipped to the trained range.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.pe.base import PositionOutOfRange, PositionScheme
from posenc.pe.resample import MODES, resample_grid


def relative_offsets(q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """(…, s_q, 2) and (…, s_k, 2) -> (…, s_q, s_k, 2) offsets q − k."""
    return q_positions[..., :, None, :] - k_positions[..., None, :, :]


class RelativeBias2D(PositionScheme):
    """A (n_h, 2H−1, 2W−1) bias table indexed by clipped (Δrow, Δcol)."""

    adds_bias = True
    encodes = "relative"
    counterpart = "relative"
    ndim = 2
    grid_methods = (*MODES, "clip")

    def __init__(self, n_heads: int, grid: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(n_heads, 2 * grid - 1, 2 * grid - 1).clamp(-2, 2) * init_std)

    @property
    def grid(self) -> tuple[int, int]:
        return (self.table.shape[1] + 1) // 2, (self.table.shape[2] + 1) // 2

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        """(…, s, 2) integer positions -> (…, n_h, s_q, s_k); offsets past the table are clipped."""
        if q_positions.is_floating_point() or k_positions.is_floating_point():
            raise PositionOutOfRange("rel2d indexes integer offsets; resample its table or clip instead")
        h, w = self.grid
        delta = relative_offsets(q_positions, k_positions)  # (…, s_q, s_k, 2)
        dr = delta[..., 0].clamp(-(h - 1), h - 1) + h - 1
        dc = delta[..., 1].clamp(-(w - 1), w - 1) + w - 1
        out = self.table[:, dr, dc]  # (n_h, …, s_q, s_k)
        return out.movedim(0, -3)  # (…, n_h, s_q, s_k)

    @torch.no_grad()
    def resample_(self, new_grid: tuple[int, int], mode: str = "bicubic", antialias: bool | None = None) -> None:
        """Interpolate the table to the offsets of ``new_grid`` in place."""
        n_h, th, tw = self.table.shape
        nh, nw = 2 * new_grid[0] - 1, 2 * new_grid[1] - 1
        flat = self.table.permute(1, 2, 0).reshape(th * tw, n_h)  # (offsets, n_h)
        flat = resample_grid(flat, (nh, nw), old_grid=(th, tw), num_prefix_tokens=0, mode=mode, antialias=antialias)
        self.table = nn.Parameter(flat.reshape(nh, nw, n_h).permute(2, 0, 1).contiguous())  # (n_h, 2H'−1, 2W'−1)
