"""FIRE: functional interpolation for relative positions (Li et al. 2023, "Functional
Interpolation for Relative Positions Improves Long Context Transformers", arXiv:2310.04418).

b(i, j) = f_θ(ψ(i − j) / ψ(max(i, L))), with ψ(x) = log(c·x + 1), f_θ a small MLP (1 → width →
n_h, ReLU), c and the threshold L learnable. Dividing by ψ of the query position maps every
distance into [0, 1], so a longer context is an interpolation, not an extrapolation; below the
threshold L the normaliser is constant and the bias depends on i − j alone. Defaults follow the
PyTorch listing in the paper's appendix as we read it (c = 0.1, L = |multiplier|·512 with the
multiplier learned from 1, MLP width 32, ε = 1e-6 added to the normaliser); no runnable reference
implementation was available offline to check against, so tests check the formula itself.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme, relative_distance, toeplitz_distances


EPS = 1e-6  # added to the normaliser


def fire_psi(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """ψ(x) = log(|c·x| + 1), elementwise."""
    return torch.log1p((c * x).abs())


def fire_inputs(q_positions: torch.Tensor, k_positions: torch.Tensor, c: torch.Tensor,
                threshold: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """(…, s_q, s_k) MLP inputs ψ(|i − j|) / ψ(max(i, L)) with ψ(x) = log(|c·x| + 1)."""
    distance = relative_distance(q_positions, k_positions).abs().float()  # (…, s_q, s_k)
    normaliser = torch.maximum(q_positions.float(), threshold)[..., :, None]  # (…, s_q, 1)
    return fire_psi(distance, c) / (fire_psi(normaliser, c) + eps)


def fire_distance_inputs(span: int, c: torch.Tensor, threshold: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """(span,) MLP inputs ψ(d) / ψ(L) of the distances d = 0..span-1: ``fire_inputs`` for queries
    below the threshold L, where the normaliser is ψ(L) for every query."""
    distance = torch.arange(span, device=threshold.device, dtype=threshold.dtype)
    return fire_psi(distance, c) / (fire_psi(threshold, c) + eps)


def fire_mlp_rows(distance: torch.Tensor, c: torch.Tensor, normaliser: torch.Tensor, mlp: nn.Sequential) -> torch.Tensor:
    """mlp(ψ(|d_t|) / N_r) of (n,) integer distances and (s_q,) normalisers N > 0 -> (n_h, s_q, n),
    with no (s_q, n, width) hidden layer.

    A 1 → width → n_h ReLU MLP is piecewise linear in its input x, with a knot x_k = −b1_k/w1_k
    per hidden unit: w2·relu(w1 x + b1) = γ·relu(x − x_k) with γ = w2·|w1|, plus w2·(w1 x + b1)
    when w1 < 0. ψ rises with |d|, so unit k is past its knot in every row from one distance on
    and in some row from a smaller one (searchsorted over the distances, once per unit): where
    every row is past, the unit adds γ·ψ/N_r − γ·x_k, a slope and an intercept per distance, and
    the bulk is one broadcast multiply-add. Only the distances where the rows straddle a knot (N
    changes little across a block of rows, so there are few) take the MLP itself, in one call.
    """
    w1, b1, w2, b2 = mlp[0].weight[:, 0], mlp[0].bias, mlp[2].weight, mlp[2].bias  # (K,), (K,), (n_h, K), (n_h,)
    n_h = w2.shape[0]
    inv = 1 / normaliser  # (s_q,)
    unit = w1 != 0
    knot = torch.where(unit, -b1 / torch.where(unit, w1, 1), 0)  # (K,)
    gamma = w2 * w1.abs()  # (n_h, K); 0 for a unit with w1 = 0, a constant relu(b1)
    negative = w1 < 0
    alpha = b2 + w2 @ torch.where(negative, b1, torch.where(unit, 0, b1.clamp(min=0)))  # (n_h,)
    beta = w2 @ torch.where(negative, w1, 0)  # (n_h,)
    a = distance.abs()  # (n,)
    span = int(a.max()) + 1
    psi = fire_psi(torch.arange(span, device=distance.device, dtype=normaliser.dtype), c)  # (span,), rising
    never = torch.where(unit, knot, torch.inf)
    past = torch.searchsorted(psi * inv.min(), never, right=True)  # (K,) every row past knot k from |d| = past on
    begin = torch.searchsorted(psi * inv.max(), never, right=True)  # (K,) some row past it from |d| = begin on
    steps = torch.zeros(2 * n_h, span + 1, dtype=gamma.dtype, device=gamma.device)
    cumulative = steps.index_add_(1, past, torch.cat((gamma, gamma * knot))).cumsum(1)[:, a]  # (2 n_h, n)
    slope, intercept = beta[:, None] + cumulative[:n_h], alpha[:, None] - cumulative[n_h:]  # (n_h, n)
    out = torch.addcmul(intercept[:, None, :], (slope * psi[a])[:, None, :], inv[None, :, None])  # (n_h, s_q, n)
    # distances where the rows straddle some knot: begin[k] <= |d| < past[k] for some k
    edges = torch.zeros(span + 1, dtype=torch.long, device=a.device)
    edges.index_add_(0, begin, torch.ones_like(begin)).index_add_(0, past, -torch.ones_like(past))
    cols = (edges.cumsum(0)[a] > 0).nonzero()[:, 0]  # (m,)
    if len(cols):  # the MLP itself there, in one call
        x = psi[a[cols]] * inv[:, None]  # (s_q, m)
        out.index_copy_(2, cols, mlp(x[..., None]).permute(2, 0, 1))  # (n_h, s_q, m)
    return out


class FirePE(PositionScheme):
    """Learned MLP bias over the log-transformed, query-normalised distance."""

    adds_bias = True
    encodes = "relative"
    counterpart = "rel2d"

    def __init__(
        self,
        n_heads: int,
        mlp_width: int = 32,
        init_c: float = 0.1,
        init_threshold: float = 512.0,
        randomized: bool = False,
        randomized_max: int = 2048,
    ) -> None:
        super().__init__()
        for name, value in (("mlp_width", mlp_width), ("init_c", init_c), ("init_threshold", init_threshold)):
            if value <= 0:
                raise ConfigError(f"pe.{name} must be > 0, got {value}")
        self.mlp = nn.Sequential(nn.Linear(1, mlp_width), nn.ReLU(), nn.Linear(mlp_width, n_heads))
        self.c = nn.Parameter(torch.tensor(init_c))
        self.threshold_multiplier = nn.Parameter(torch.tensor(1.0))
        self.register_buffer("init_threshold", torch.tensor(float(init_threshold)), persistent=False)
        self.set_randomized(randomized, randomized_max)

    @property
    def threshold(self) -> torch.Tensor:
        """L = |multiplier|·``init_threshold``, a 0-dim tensor with a gradient."""
        return (self.threshold_multiplier * self.init_threshold).abs()

    def distance_table(self, span: int) -> torch.Tensor:
        """(n_h, span) bias of the distances |i − j| = 0..span-1 for queries below the threshold:
        the MLP runs once per distance, not once per (query, key) pair."""
        return self.mlp(fire_distance_inputs(span, self.c, self.threshold)[:, None]).T

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        threshold = self.threshold
        integer = not (q_positions.is_floating_point() or k_positions.is_floating_point())
        if integer and q_positions.numel() and k_positions.numel() and bool(q_positions.max() < threshold):
            # below L the bias depends on |i − j| alone: the pairs gather the rows of a per-distance table
            low = torch.minimum(q_positions.min(), k_positions.min())
            span = int(torch.maximum(q_positions.max(), k_positions.max()) - low) + 1
            distance = relative_distance(q_positions, k_positions).abs()  # (…, s_q, s_k)
            return self.distance_table(span)[:, distance].movedim(0, -3)  # (…, n_h, s_q, s_k)
        x = fire_inputs(q_positions, k_positions, self.c, threshold)  # (…, s_q, s_k)
        return self.mlp(x[..., None]).movedim(-1, -3)  # (…, n_h, s_q, s_k)

    def distance_rows(self, q_positions: torch.Tensor, distances: torch.Tensor) -> torch.Tensor | None:
        if q_positions.dim() != 1 or q_positions.is_floating_point():
            return None
        normaliser = fire_psi(torch.maximum(q_positions.float(), self.threshold), self.c) + EPS  # (s_q,)
        return fire_mlp_rows(distances, self.c, normaliser, self.mlp)  # (n_h, s_q, n)

    def distance_bias(self, positions: torch.Tensor) -> torch.Tensor | None:
        distance = toeplitz_distances(positions)  # (2s − 1,)
        if distance is None or not bool(positions.max() < self.threshold):
            return None  # past L each query row has its own normaliser ψ(i)
        return self.distance_table(positions.shape[-1])[:, distance.abs()]  # (n_h, 2s − 1)
