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


def fire_inputs(
    q_positions: torch.Tensor, k_positions: torch.Tensor, c: torch.Tensor, threshold: torch.Tensor, eps: float = EPS
) -> torch.Tensor:
    """(…, s_q, s_k) MLP inputs ψ(|i − j|) / ψ(max(i, L)) with ψ(x) = log(|c·x| + 1)."""
    distance = relative_distance(q_positions, k_positions).abs().float()  # (…, s_q, s_k)
    normaliser = torch.maximum(q_positions.float(), threshold)[..., :, None]  # (…, s_q, 1)
    return fire_psi(distance, c) / (fire_psi(normaliser, c) + eps)


def fire_distance_inputs(span: int, c: torch.Tensor, threshold: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """(span,) MLP inputs ψ(d) / ψ(L) of the distances d = 0..span-1: ``fire_inputs`` for queries
    below the threshold L, where the normaliser is ψ(L) for every query."""
    distance = torch.arange(span, device=threshold.device, dtype=threshold.dtype)
    return fire_psi(distance, c) / (fire_psi(threshold, c) + eps)


def fire_mlp_segments(mlp: nn.Sequential) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A 1 → width → n_h ReLU MLP as the piecewise-linear function it is: sorted knots (k,) and
    per segment a slope and an intercept (n_h, k + 1), so that mlp(x) = intercept[:, j] +
    slope[:, j]·x with j = ``torch.bucketize(x, knots)``.

    Hidden unit u is relu(w1_u·x + b1_u), with its knot at x = −b1_u/w1_u (none when w1_u = 0,
    a constant relu(b1_u)); between two knots the set of active units is fixed, read off at a
    point inside the segment, and the MLP is the linear map of those units. The slopes and
    intercepts are differentiable functions of the weights (the active set is relu's own choice).
    """
    w1, b1, w2, b2 = mlp[0].weight[:, 0], mlp[0].bias, mlp[2].weight, mlp[2].bias  # (K,), (K,), (n_h, K), (n_h,)
    with torch.no_grad():
        knots = (-b1 / w1)[w1 != 0].sort().values  # (k,)
        if len(knots):
            inside = torch.cat((knots[:1] - 1, (knots[:-1] + knots[1:]) / 2, knots[-1:] + 1))  # (k + 1,)
        else:
            inside = torch.zeros(1, dtype=w1.dtype, device=w1.device)
        active = (w1 * inside[:, None] + b1 > 0).to(w1.dtype)  # (k + 1, K)
    slope = (active * w1) @ w2.T  # (k + 1, n_h)
    intercept = (active * b1) @ w2.T + b2  # (k + 1, n_h)
    return knots, slope.T, intercept.T


def fire_mlp_rows(
    distance: torch.Tensor,
    c: torch.Tensor,
    normaliser: torch.Tensor,
    segments: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """mlp(ψ(|d_t|) / N_r) of (n,) integer distances and (s_q,) normalisers N > 0 -> (n_h, s_q, n),
    given the MLP's ``segments`` (``fire_mlp_segments``), with no (s_q, n, width) hidden layer;
    written into ``out`` when given (no gradient then: ``out=`` has none).

    ψ(|d|)/N_r for one distance spans [ψ/N_max, ψ/N_min] over the rows, segments low..high. The
    bulk is one broadcast multiply-add on segment low: intercept + slope·ψ·(1/N_r). Only the
    distances whose rows straddle a knot (N changes little across a block of rows, so there are
    few) get, for each knot k they straddle, the step from segment k to k + 1 on the rows past it.
    """
    knots, slope, intercept = segments  # (k,), (n_h, k + 1), (n_h, k + 1)
    inv = 1 / normaliser  # (s_q,)
    psi = fire_psi(distance.abs().to(normaliser.dtype), c)  # (n,), >= 0
    low = torch.bucketize(psi.detach() * inv.min().detach(), knots)  # (n,) segment of the lowest input
    high = torch.bucketize(psi.detach() * inv.max().detach(), knots)  # (n,) and of the highest
    # index_select: advanced indexing is several times slower for these small gathers
    out = torch.addcmul(
        intercept.index_select(1, low)[:, None, :],
        (slope.index_select(1, low) * psi)[:, None, :],
        inv[None, :, None],
        out=out,
    )  # (n_h, s_q, n)
    cols = (low != high).nonzero()[:, 0]  # (m,) distances whose rows straddle knots low..high-1
    if not len(cols):
        return out
    # ψ is monotone in |d|, so these come in runs of consecutive distances with one (low, high):
    # per run and knot k a slice of ``out`` steps from segment k to k + 1 on the rows past the
    # knot (input > knot, as bucketize counts). Slices, no gather.
    lo, hi = low.index_select(0, cols), high.index_select(0, cols)
    new_run = torch.cat((cols.new_ones(1, dtype=torch.bool), (cols.diff() != 1) | (lo.diff() != 0) | (hi.diff() != 0)))
    heads = new_run.nonzero()[:, 0]  # first straddling column of each run
    tails = torch.cat((heads[1:], heads.new_tensor([len(cols)]))) - 1  # and its last
    d_intercept, d_slope = intercept.diff(dim=1), slope.diff(dim=1)  # (n_h, k) step at each knot
    for a, b, first, last in zip(
        cols[heads].tolist(), (cols[tails] + 1).tolist(), lo[heads].tolist(), hi[heads].tolist()
    ):
        x = psi[a:b] * inv[:, None]  # (s_q, w), the inputs bucketize would see
        for k in range(first, last):
            step = torch.addcmul(d_intercept[:, k, None, None], d_slope[:, k, None, None], x)  # (n_h, s_q, w)
            out[:, :, a:b] += step * (x.detach() > knots[k])
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
        self._segments: tuple[tuple, tuple[torch.Tensor, ...]] | None = None  # see ``segments``

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

    def distance_rows(
        self, q_positions: torch.Tensor, distances: torch.Tensor, out: torch.Tensor | None = None
    ) -> torch.Tensor | None:
        if q_positions.dim() != 1 or q_positions.is_floating_point():
            return None
        normaliser = fire_psi(torch.maximum(q_positions.float(), self.threshold), self.c) + EPS  # (s_q,)
        return fire_mlp_rows(distances, self.c, normaliser, self.segments(), out)  # (n_h, s_q, n)

    def segments(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``fire_mlp_segments`` of the MLP. Without a gradient they are kept while the MLP's
        parameters are unchanged (same storage, same version): every chunk of every layer of an
        evaluation shares one; with a gradient each call builds its own graph."""
        if torch.is_grad_enabled():
            return fire_mlp_segments(self.mlp)
        key = tuple((p.data_ptr(), p._version, p.dtype) for p in self.mlp.parameters())
        if self._segments is None or self._segments[0] != key:
            self._segments = (key, fire_mlp_segments(self.mlp))
        return self._segments[1]

    def score_mod(self, positions: torch.Tensor):
        """For (s,) integer positions stepping by 1: score + mlp(ψ(|i − j|)·inv_i), the MLP
        unrolled over its hidden units, ψ of every distance and 1/ψ(max(p_i, L)) of every query
        computed once; nothing of size (s, s). Other positions: None."""
        if positions.dim() != 1 or toeplitz_distances(positions) is None:
            return None
        psi = fire_psi(torch.arange(positions.shape[0], device=positions.device, dtype=torch.float32), self.c)
        inv = 1 / (fire_psi(torch.maximum(positions.float(), self.threshold), self.c) + EPS)  # (s,)
        w1, b1, b2 = self.mlp[0].weight[:, 0], self.mlp[0].bias, self.mlp[2].bias
        w2 = self.mlp[2].weight.t().unbind(0)  # per hidden unit, (n_h,): indexed by the head tensor alone

        def score_mod(score, batch, head, i, j):
            x = psi[(i - j).abs()] * inv[i]
            bias = b2[head]
            for unit in range(w1.shape[0]):
                bias = bias + w2[unit][head] * torch.relu(w1[unit] * x + b1[unit])
            return score + bias

        return score_mod

    def distance_bias(self, positions: torch.Tensor) -> torch.Tensor | None:
        distance = toeplitz_distances(positions)  # (2s − 1,)
        if distance is None or not bool(positions.max() < self.threshold):
            return None  # past L each query row has its own normaliser ψ(i)
        return self.distance_table(positions.shape[-1])[:, distance.abs()]  # (n_h, 2s − 1)
