"""ALiBi on a patch grid: a head-specific penalty linear in the Euclidean distance between patches.

Slopes are ALiBi's geometric sequence (Press et al. 2022, §3 and the reference ``get_slopes`` in
ofirpress/attention_with_linear_biases); the 1D distance |i − j| becomes
sqrt(Δrow² + Δcol²), as in 2D ALiBi variants for vision (e.g. Fuller et al. 2023, CROMA).
"""

from __future__ import annotations

import torch

from posenc.pe.alibi import alibi_slopes  # the 1D family's slopes, one definition
from posenc.pe.base import PositionScheme
from posenc.pe.grid import COORDINATE_METHODS
from posenc.pe.rel2d import relative_offsets


class ALiBi2D(PositionScheme):
    """bias[h, i, j] = −slope_h · ‖p_i − p_j‖₂, defined for any (row, col), integer or not."""

    adds_bias = True
    encodes = "relative"
    counterpart = "alibi"
    ndim = 2
    grid_methods = COORDINATE_METHODS

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        """(…, s, 2) positions -> (…, n_h, s_q, s_k)."""
        dist = relative_offsets(q_positions.float(), k_positions.float()).pow(2).sum(-1).sqrt()  # (…, s_q, s_k)
        return -self.slopes[:, None, None] * dist[..., None, :, :]  # (…, n_h, s_q, s_k)
