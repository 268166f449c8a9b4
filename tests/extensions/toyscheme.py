"""A researcher's own 1D scheme: one fixed slope of distance penalty on every head."""

import torch

from posenc.pe.base import PositionScheme, relative_distance


class FixedBias(PositionScheme):
    """bias[h, i, j] = −slope · |i − j| for every head h."""

    adds_bias = True
    encodes = "relative"

    def __init__(self, n_heads: int, slope: float = 0.1) -> None:
        super().__init__()
        self.n_heads, self.slope = n_heads, slope

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        d = relative_distance(q_positions, k_positions).abs().float()  # (…, s_q, s_k)
        return (-self.slope * d).unsqueeze(-3).expand(*d.shape[:-2], self.n_heads, *d.shape[-2:])
