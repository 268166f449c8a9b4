"""Fixed 2D sine-cosine embedding (MAE: He et al. 2022; reference ``get_2d_sincos_pos_embed`` in
facebookresearch/mae ``util/pos_embed.py``).

Half of the dimensions encode the column and half the row, each as a 1D sinusoid with its sines
in the first half and cosines in the second (MAE's layout, not Vaswani's interleaving). The dot
product of two embeddings then depends only on (Δrow, Δcol).
"""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme
from posenc.pe.grid import COORDINATE_METHODS


def sincos_1d(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """(…,) positions -> (…, dim): [sin(p·ω), cos(p·ω)] with ω_i = base^(-i/(dim/2)), float64."""
    omega = base ** (-torch.arange(dim // 2, dtype=torch.float64, device=positions.device) / (dim / 2))
    angles = positions.to(torch.float64)[..., None] * omega  # (…, dim/2)
    return torch.cat((angles.sin(), angles.cos()), dim=-1)


def sincos_2d(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """(…, 2) (row, col) -> (…, dim): column half first, as MAE lays it out, float64."""
    return torch.cat(
        (sincos_1d(positions[..., 1], dim // 2, base), sincos_1d(positions[..., 0], dim // 2, base)), dim=-1
    )


class SinCos2D(PositionScheme):
    """Fixed 2D sin-cos table, defined for every (row, col), integer or not."""

    adds_embedding = True
    encodes = "absolute"
    counterpart = "sinusoidal"
    ndim = 2
    grid_methods = COORDINATE_METHODS

    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__()
        if dim % 4:
            raise ConfigError(f"sincos2d needs d_model divisible by 4, got model.d_model={dim}")
        self.dim, self.base = dim, base

    def embedding(self, positions: torch.Tensor) -> torch.Tensor:
        return sincos_2d(positions, self.dim, self.base).to(torch.get_default_dtype())  # (…, s, d)
