"""KERPLE, logarithmic variant (Chi et al. 2022, "KERPLE: Kernelized Relative Positional
Embedding for Length Extrapolation", arXiv:2205.09921, §4).

Head h adds −r1_h·log(1 + r2_h·|i − j|) with learnable r1, r2 > 0: a conditionally positive
definite kernel whose penalty grows only logarithmically with distance. Parameters as in the
reference implementation (chijames/KERPLE, ``megatron/model/transformer.py``): r1 ~ U(0, 2),
r2 ~ U(0, 1), both kept at or above ``eps`` = 0.01 by clamping their ``.data`` outside autograd,
as the reference does before each use: here at construction and after every optimizer step
(``after_optimizer_step``, which the training loop calls). A clamp inside the forward pass
instead would give a parameter below eps zero gradient for good.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme, relative_distance, toeplitz_distances


def kerple_log_bias(distance: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
    """(…, s_q, s_k) distances and (n_h,) r1, r2 -> (…, n_h, s_q, s_k) bias −r1·log(1 + r2·|d|)."""
    d = distance.abs().float()[..., None, :, :]  # (…, 1, s_q, s_k)
    return -r1[:, None, None] * torch.log1p(r2[:, None, None] * d)


class KerpleLogPE(PositionScheme):
    """Learned logarithmic distance penalty per head."""

    adds_bias = True
    encodes = "relative"
    counterpart = "alibi2d"

    def __init__(self, n_heads: int, eps: float = 1e-2, randomized: bool = False, randomized_max: int = 2048) -> None:
        super().__init__()
        if eps <= 0:
            raise ConfigError(f"pe.eps must be > 0, got {eps}")
        self.eps = eps
        self.r1 = nn.Parameter(torch.rand(n_heads) * 2)
        self.r2 = nn.Parameter(torch.rand(n_heads))
        self.after_optimizer_step()  # 0.5% of r1 and 1% of r2 draws start below eps
        self.set_randomized(randomized, randomized_max)

    @torch.no_grad()
    def after_optimizer_step(self) -> None:
        """Clamp r1 and r2 to at least eps in place; the gradient never sees the clamp."""
        self.r1.clamp_(min=self.eps)
        self.r2.clamp_(min=self.eps)

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        distance = relative_distance(q_positions, k_positions)  # (…, s_q, s_k)
        return kerple_log_bias(distance, self.r1, self.r2)

    def distance_bias(self, positions: torch.Tensor) -> torch.Tensor | None:
        distance = toeplitz_distances(positions)  # (2s − 1,)
        return None if distance is None else kerple_log_bias(distance[None], self.r1, self.r2)[:, 0]  # (n_h, 2s − 1)
