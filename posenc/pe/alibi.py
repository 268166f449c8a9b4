"""ALiBi: attention with linear biases (Press et al. 2022, "Train Short, Test Long",
arXiv:2108.12409).

Head h adds −m_h·|i − j| to its scores, with no learned parameter. For n heads, n a power of two,
the slopes are the geometric sequence m_h = 2^(−8h/n), h = 1..n. For other n the paper takes the
slopes of the closest smaller power of two n' and fills the remaining n − n' heads with every
other slope of the 2n' sequence (the ones that fall between them). Checked against the formula
and against ``transformers.models.bloom.modeling_bloom.build_alibi_tensor`` (tests/pe/test_alibi.py).

Under a causal mask, −m·(i − j) = m·j − m·i and the row constant −m·i cancels in the softmax, so
ALiBi equals the key-only bias m·(j − c) for any constant c (``key_bias``; c is the centre of the
positions, which keeps the values within ±m·s/2). The model folds it into one extra Q/K dimension
and keeps the fused causal attention kernel: no L×L bias at any length
(``posenc.models.blocks.key_bias_attention``; tests/pe/test_alibi.py and
tests/models/test_chunked_attention.py check both forms agree).
"""

from __future__ import annotations

import math

import torch

from posenc.pe.base import PositionScheme, relative_distance, toeplitz_distances


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """(n_h,) slopes m_h, float32, in the paper's head order."""

    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = geometric(closest) + geometric(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


class AlibiPE(PositionScheme):
    """Fixed linear distance penalty per head; defined at every length."""

    adds_bias = True
    has_key_bias = True
    encodes = "relative"
    counterpart = "alibi2d"

    def __init__(self, n_heads: int, randomized: bool = False, randomized_max: int = 2048) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)
        self.set_randomized(randomized, randomized_max)

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        distance = relative_distance(q_positions, k_positions).abs().float()  # (…, s_q, s_k)
        return -self.slopes[:, None, None] * distance[..., None, :, :]  # (…, n_h, s_q, s_k)

    def distance_bias(self, positions: torch.Tensor) -> torch.Tensor | None:
        distance = toeplitz_distances(positions)  # (2s − 1,)
        return None if distance is None else -self.slopes[:, None] * distance.abs().float()  # (n_h, 2s − 1)

    def key_bias(self, k_positions: torch.Tensor) -> torch.Tensor:
        p = k_positions.float()
        centred = p - (p.amax(-1, keepdim=True) + p.amin(-1, keepdim=True)) / 2  # (…, s_k)
        return self.slopes[:, None] * centred[..., None, :]  # (…, n_h, s_k)
