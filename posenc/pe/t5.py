"""T5 relative position buckets (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
with a Unified Text-to-Text Transformer", arXiv:1910.10683, §2.1).

Each head learns one scalar per bucket of the distance: half of the buckets are exact small
distances, the rest grow logarithmically up to ``max_distance``, past which all distances share
the last bucket. A causal model (``bidirectional=False``) only buckets keys in the past; a
bidirectional one (the T5 encoder) halves the buckets by the sign of j − i, which
``configs/pe/t5.yaml`` picks whenever ``model.causal`` is false.
Checked against ``transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket``
(tests/pe/test_t5.py).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme, relative_distance, toeplitz_distances


def t5_bucket(
    relative_position: torch.Tensor,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """Bucket of each key-minus-query distance j − i, in [0, ``num_buckets``), as T5 defines it."""
    relative_position = relative_position.long()
    offset = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        offset = (relative_position > 0).long() * num_buckets  # keys in the future: upper half
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # future keys fold onto distance 0
    exact = num_buckets // 2
    # log-spaced buckets between `exact` and `max_distance`; clamped so log never sees 0
    log_ratio = torch.log(distance.clamp(min=exact).float() / exact) / math.log(max_distance / exact)
    large = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return offset + torch.where(distance < exact, distance, large)


class T5BiasPE(PositionScheme):
    """A (num_buckets, n_h) table of biases indexed by ``t5_bucket``, initialised N(0, ``init_std``²)."""

    adds_bias = True
    encodes = "relative"
    counterpart = "rel2d"

    def __init__(
        self,
        n_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = False,
        init_std: float = 0.02,
        randomized: bool = False,
        randomized_max: int = 2048,
    ) -> None:
        super().__init__()
        exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
        if exact < 1:
            raise ConfigError(f"pe.num_buckets={num_buckets} is too small; need >= {4 if bidirectional else 2}")
        if max_distance <= exact:
            raise ConfigError(
                f"pe.max_distance={max_distance} must be larger than the {exact} exact buckets "
                f"(half of pe.num_buckets{' / 2' if bidirectional else ''})"
            )
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.table = nn.Parameter(torch.randn(num_buckets, n_heads) * init_std)
        self.set_randomized(randomized, randomized_max)

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        key_minus_query = -relative_distance(q_positions, k_positions).round()  # (…, s_q, s_k)
        buckets = t5_bucket(key_minus_query, self.bidirectional, self.num_buckets, self.max_distance)
        return self.table[buckets].movedim(-1, -3)  # (…, n_h, s_q, s_k)

    def distance_bias(self, positions: torch.Tensor) -> torch.Tensor | None:
        distance = toeplitz_distances(positions)  # (2s − 1,) i − j
        if distance is None:
            return None
        buckets = t5_bucket(-distance, self.bidirectional, self.num_buckets, self.max_distance)
        return self.table[buckets].T  # (n_h, 2s − 1)
