"""Fixed sinusoidal embedding (Vaswani et al. 2017, "Attention Is All You Need", §3.5).

PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)). Each (sin, cos)
pair rotates by the angle Δ·ω_i under a shift, so PE(pos+Δ) = M_Δ PE(pos) with M_Δ block-diagonal
and independent of pos (seed claim C4).
"""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme


def sinusoidal_frequencies(dim: int, base: float = 10000.0) -> torch.Tensor:
    """ω_i = base^(-2i/d) for i < d/2, shape (d/2,), float64."""
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def sinusoidal_table(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """(…,) positions -> (…, d) embedding with sin in even and cos in odd dimensions."""
    angles = positions.to(torch.float64)[..., None] * sinusoidal_frequencies(dim, base).to(positions.device)
    out = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (..., d/2, 2)
    return out.flatten(-2)  # (..., d)


def shift_matrix(delta: float, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The (d, d) block-diagonal M_Δ with PE(pos + Δ) = M_Δ PE(pos), float64."""
    m = torch.zeros(dim, dim, dtype=torch.float64)
    for i, w in enumerate(sinusoidal_frequencies(dim, base)):
        c, s = torch.cos(delta * w), torch.sin(delta * w)
        # [sin(a+b), cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] @ [sin a, cos a]
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.stack((torch.stack((c, s)), torch.stack((-s, c))))
    return m


class SinusoidalPE(PositionScheme):
    """Sinusoidal table added to the input, defined for every position (no table length).

    ``scale`` multiplies the table. Vaswani et al. scale the token embeddings up by √d instead;
    posenc's models keep embeddings at their init std (0.02), so the table is scaled down to
    match, or the unit-amplitude waves would drown the tokens.
    """

    adds_embedding = True
    encodes = "absolute"
    counterpart = "sincos2d"

    def __init__(
        self, dim: int, base: float = 10000.0, scale: float = 1.0, randomized: bool = False, randomized_max: int = 2048
    ) -> None:
        super().__init__()
        if dim % 2:
            raise ConfigError(f"sinusoidal embedding needs an even model dimension, got d_model={dim}")
        self.dim, self.base, self.scale = dim, base, scale
        self.set_randomized(randomized, randomized_max)

    def embedding(self, positions: torch.Tensor) -> torch.Tensor:
        return (self.scale * sinusoidal_table(positions, self.dim, self.base)).to(torch.get_default_dtype())
