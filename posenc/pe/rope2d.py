"""2D rotary embeddings for patch grids (RoPE-ViT: Heo et al. 2024, "Rotary Position Embedding
for Vision Transformer", reference naver-ai/rope-vit ``compute_axial_cis``/``compute_mixed_cis``).

* ``axial``: the first half of the rotated pairs turn with the column, the second half with the
  row, frequencies θ_t = base^(−4t/h_d) with base 100;
* ``mixed``: every pair turns by col·f_x + row·f_y with learnable per-head (f_x, f_y), initialised
  to RoPE-ViT's random directions (base 10), so a head can attend along diagonals.

Pairs are interleaved (2i, 2i+1), as RoPE-ViT's complex multiply pairs them. Either way the
score q_m·k_n depends only on (Δrow, Δcol), and the tokens in front of the patches (cls) are
never rotated. RoPE-ViT learns one set of mixed frequencies per layer; here one set serves every
layer, since a scheme's rotation is computed once per forward pass.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme
from posenc.pe.grid import COORDINATE_METHODS, split_prefix
from posenc.pe.rope import apply_rope


def axial_frequencies(head_dim: int, base: float = 100.0) -> torch.Tensor:
    """θ_t = base^(−4t/h_d), t < h_d/4, float32 (RoPE-ViT's ``arange(0, dim, 4) / dim``)."""
    return 1.0 / (base ** (torch.arange(0, head_dim, 4)[: head_dim // 4].float() / head_dim))


def mixed_frequencies(
    head_dim: int, n_heads: int, base: float = 10.0, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(2, n_h, h_d/2) initial (f_x, f_y): per head, two orthogonal directions at a random angle."""
    mag = axial_frequencies(head_dim, base)  # (h_d/4,)
    angle = torch.rand(n_heads, 1, generator=generator) * 2 * math.pi  # (n_h, 1)
    fx = torch.cat((mag * torch.cos(angle), mag * torch.cos(angle + math.pi / 2)), dim=-1)  # (n_h, h_d/2)
    fy = torch.cat((mag * torch.sin(angle), mag * torch.sin(angle + math.pi / 2)), dim=-1)  # (n_h, h_d/2)
    return torch.stack((fx, fy))


def rotate_patches(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the last cos.shape[-2] tokens of (b, n_h, s, h_d); the prefix tokens stay."""
    prefix, patches = split_prefix(x, cos.shape[-2])
    return torch.cat((prefix, apply_rope(patches, cos, sin, "interleaved")), dim=-2)


class RoPE2D(PositionScheme):
    """Rotary embedding of Q and K by (row, col); ``mode`` is ``axial`` or ``mixed``."""

    rotates_qk = True
    encodes = "relative"
    counterpart = "rope"
    ndim = 2
    grid_methods = COORDINATE_METHODS

    def __init__(self, head_dim: int, n_heads: int, mode: str = "axial", base: float | None = None) -> None:
        super().__init__()
        if mode not in ("axial", "mixed"):
            raise ConfigError(f"pe.mode '{mode}' is not a 2D RoPE mode; valid: axial, mixed")
        if head_dim % 4:
            raise ConfigError(
                f"2D RoPE needs a head dim divisible by 4 (two axes x pairs), got {head_dim}; "
                "change model.d_model or model.n_heads"
            )
        self.mode, self.head_dim = mode, head_dim
        if mode == "axial":
            self.register_buffer(
                "freqs", axial_frequencies(head_dim, 100.0 if base is None else base), persistent=False
            )
        else:
            self.freqs = nn.Parameter(mixed_frequencies(head_dim, n_heads, 10.0 if base is None else base))

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        """(…, s, 2) (row, col) -> axial (…, s, h_d/2) or mixed (…, n_h, s, h_d/2) angles."""
        pos = positions.float()
        row, col = pos[..., 0], pos[..., 1]
        if self.mode == "axial":
            return torch.cat((col[..., None] * self.freqs, row[..., None] * self.freqs), dim=-1)  # (…, s, h_d/2)
        fx, fy = self.freqs[0], self.freqs[1]  # (n_h, h_d/2)
        return col[..., None, :, None] * fx[:, None] + row[..., None, :, None] * fy[:, None]  # (…, n_h, s, h_d/2)

    def rotation(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        angles = self.angles(positions)
        if self.mode == "mixed" and angles.dim() == 3:
            angles = angles[None]  # (1, n_h, s, h_d/2): apply_rope reads a 3D table as (b, s, ·)
        return angles.cos().to(dtype), angles.sin().to(dtype)

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, rotation) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = rotation
        return rotate_patches(q, cos, sin), rotate_patches(k, cos, sin)
