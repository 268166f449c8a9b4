"""xPos: RoPE with an exponential scale (Sun et al. 2022, "A Length-Extrapolatable Transformer",
arXiv:2212.10554, §3.2).

Rotation pair i of a query at position n is also scaled by ζ_i^(n/B) and of a key at position m
by ζ_i^(−m/B), with ζ_i = (2i/d + γ)/(1 + γ), γ = 0.4 and B = ``scale_base`` (512). The rotation
keeps q_n·k_m a function of n − m (RoPE) and the scales multiply pair i of the product by
ζ_i^((n − m)/B) < 1: attention decays with distance, more for the high-frequency pairs. As in
the reference implementation (microsoft/torchscale, ``torchscale/component/xpos_relative_position.py``),
ζ is per pair, and positions are centred on the middle of the sequence before the exponent so the
scales neither overflow nor underflow at long lengths (a constant shift leaves every q·k unchanged).

The rotation reuses ``posenc.pe.rope``'s pure functions; the scale multiplies cos and sin, which
scales the rotated pair without a second pass over Q and K.

xPos is ``Rotary`` (``posenc.pe.rope``), so every frequency scaling applies to it and changes the
rotation only: PI rotates by the angles of xPos at positions n/s, NTK changes θ exactly as on
RoPE, YaRN's temperature multiplies cos and sin of queries and keys alike. The decay
ζ^((n − m)/B) stays a function of the token distance n − m, as trained. That is a choice: Sun et
al. 2022 introduce ζ as the part of xPos that extrapolates by itself (§3.2, "attention resolution":
a penalty that only grows with distance keeps attention local at any length); a longer distance
gives it no unseen phase for interpolation to bring back, only a smaller weight, and dividing its
exponent by s would loosen the locality the model was trained with. Decay and rotation both at
n/s is xPos fed the positions n/s (or PI with ``scale_base`` B·s).
"""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme
from posenc.pe.rope import Layout, apply_rope, checked_frequencies, rope_angles, rope_inv_freq


def xpos_zeta(rot_dim: int, gamma: float = 0.4) -> torch.Tensor:
    """(r/2,) per-pair decay ζ_i = (2i/r + γ)/(1 + γ), float32."""
    return (torch.arange(0, rot_dim, 2, dtype=torch.float32) / rot_dim + gamma) / (1 + gamma)


def xpos_scale(positions: torch.Tensor, zeta: torch.Tensor, scale_base: float) -> torch.Tensor:
    """(…, s) positions -> (…, s, r/2) query scales ζ^((n − c)/B), c the centre of each row.

    Keys use the reciprocal. Centring changes no q·k (only n − m matters) and keeps the largest
    exponent at half the sequence length.
    """
    p = positions.float()
    centre = (p.amax(-1, keepdim=True) + p.amin(-1, keepdim=True)) / 2  # (…, 1)
    return zeta.to(p.device) ** ((p - centre)[..., None] / scale_base)


class XPos(PositionScheme):
    """RoPE rotation plus ζ^(n/B) on queries and ζ^(−m/B) on keys."""

    rotates_qk = True
    encodes = "relative"
    counterpart = "rope2d_axial"

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        layout: Layout = "half",
        scale_base: float = 512.0,
        gamma: float = 0.4,
        randomized: bool = False,
        randomized_max: int = 2048,
    ) -> None:
        super().__init__()
        if head_dim % 2 or head_dim == 0:
            raise ConfigError(
                f"xpos needs an even head dimension, got head_dim={head_dim}; pick d_model / n_heads even"
            )
        if base <= 1.0:
            raise ConfigError(f"pe.base must be > 1, got {base}")
        if scale_base <= 0:
            raise ConfigError(f"pe.scale_base must be > 0, got {scale_base}")
        if gamma <= 0:
            raise ConfigError(f"pe.gamma must be > 0, got {gamma}")
        self.layout, self.scale_base = layout, scale_base
        self.rot_dim, self.base, self.attention_scaling = head_dim, base, 1.0
        self.register_buffer("inv_freq", rope_inv_freq(head_dim, base), persistent=False)
        self.register_buffer("zeta", xpos_zeta(head_dim, gamma), persistent=False)
        self.set_randomized(randomized, randomized_max)

    def rotation(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        angles = rope_angles(positions, self.inv_freq)  # (…, s, r/2)
        scale = xpos_scale(positions, self.zeta, self.scale_base)  # (…, s, r/2)
        cos, sin = angles.cos() * self.attention_scaling, angles.sin() * self.attention_scaling
        return tuple(t.to(dtype) for t in (cos * scale, sin * scale, cos / scale, sin / scale))

    def set_frequencies(self, inv_freq: torch.Tensor, attention_scaling: float = 1.0) -> None:
        """Rotate by (r/2,) rescaled frequencies, cos and sin times ``attention_scaling``; ζ is kept."""
        self.inv_freq = checked_frequencies(self.inv_freq, inv_freq, "xpos")
        self.attention_scaling = float(attention_scaling)

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, rotation) -> tuple[torch.Tensor, torch.Tensor]:
        q_cos, q_sin, k_cos, k_sin = rotation
        return apply_rope(q, q_cos, q_sin, self.layout), apply_rope(k, k_cos, k_sin, self.layout)
