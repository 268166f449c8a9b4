"""Numeric checks of the seed's mathematics, run on any scheme through the scheme interface.

Each check takes a scheme (selected by what it does: ``adds_embedding``, ``rotates_qk``,
``adds_bias``, ``ndim``, never by name), measures one error and compares it with a stated
tolerance. Curves for the plots come back with the numbers.

* C4 (Vaswani et al. 2017, §3.5): for a fixed embedding, PE(pos + Δ) = M_Δ·PE(pos) with M_Δ
  independent of pos. M_Δ is fitted by least squares on one window of positions and must
  reproduce a far window.
* C9 (Su et al. 2021, RoFormer §3.4.2): ⟨R_m q, R_n k⟩ depends on n − m only (1D) or on
  (Δrow, Δcol) (2D); rotating keeps norms; V is not rotated. A bias scheme's bias depends on the
  offset i − j only (Shaw et al. 2018; Raffel et al. 2020; Press et al. 2022).
* C10 (RoFormer §3.4.3): the relative upper bound (1/(d/2))·Σ_j |S_j|, S_j = Σ_{k<j} e^{iΔθ_k},
  decays with Δ; one frequency returns to its start within a few positions, all of them
  together do not.

Frequencies of a rotating scheme are read through the interface: the eigenvalues of
R_0ᵀR_1 (probed with basis vectors) are e^{±iθ_k}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from posenc.models.blocks import Attention
from posenc.pe.base import PositionScheme

EPS32 = torch.finfo(torch.float32).eps


@dataclass
class Measurement:
    """One measured number against its tolerance. ``at_most``: pass when measured ≤ tolerance;
    otherwise pass when measured ≥ tolerance (a threshold that must be exceeded)."""

    claim: str
    check: str
    measured: float
    tolerance: float
    at_most: bool = True
    note: str = ""
    kind: str = ""  # which figure it belongs to: c4_shift, c9_relative, ...
    curves: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        if not math.isfinite(self.measured):
            return False
        return self.measured <= self.tolerance if self.at_most else self.measured >= self.tolerance


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def grid_positions(side: int, offset: int = 0) -> torch.Tensor:
    """(side², 2) (row, col) positions of a square grid in raster order, shifted by ``offset``."""
    r = torch.arange(side) + offset
    return torch.stack(torch.meshgrid(r, r, indexing="ij"), -1).reshape(-1, 2)


def _positions(ndim: int, count: int, offset: int = 0) -> torch.Tensor:
    """About ``count`` positions: a line of them (1D), or a square grid (2D)."""
    if ndim == 1:
        return torch.arange(count) + offset
    return grid_positions(int(math.isqrt(count)), offset)


# ---------------------------------------------------------------------------------------- C4


def _shift_window(ndim: int) -> torch.Tensor:
    """(n,) or (n, ndim) positions: every coordinate below 512, then every 1031st out to 2^20.

    The sparse part makes even the slowest sinusoid (period 2π·10000 ≈ 63k) turn through many
    cycles inside the window, so M_Δ is determined in every direction (out to 65536 only, the
    slow columns are collinear to 1e-11 and the fit is noise there). In 2D every axis takes all
    these values, paired at random across axes: a grid of them would repeat too few values per
    axis to determine the axis' columns.
    """
    values = torch.cat((torch.arange(512), torch.arange(512, 1 << 20, 1031)))
    if ndim == 1:
        return values
    g = torch.Generator().manual_seed(0)
    return torch.stack([values] + [values[torch.randperm(len(values), generator=g)] for _ in range(ndim - 1)], -1)


def shift_fit(pe: PositionScheme, deltas: list[int], far: int = 3_000_017) -> Measurement:
    """C4: fit M_Δ by least squares on one window of positions, apply it to a far window.

    The window is ``_shift_window`` (in 2D the shift is (Δ, 2Δ)); the far window is the same
    shifted by ``far`` on every axis.
    Measured: the largest relative residual ‖E(P+Δ) − E(P)·M_Δ‖ / ‖E(P+Δ)‖ over both windows
    and every Δ, and ‖M_Δ − M_Δ,far‖ / ‖M_Δ‖ with M_Δ,far fitted on the far window. Tolerance 1e-5: the table is
    float32 (≈ 1e-7 relative rounding).
    """
    near = _shift_window(pe.ndim)
    distant = near + far
    step = torch.tensor([1]) if pe.ndim == 1 else torch.tensor([1, 2])
    emb = lambda p: pe.embedding(p).detach().double()  # noqa: E731  (s, d)
    worst, rows, matrices = 0.0, [], {}
    for delta in deltas:
        shift = (delta * step).squeeze(0)
        x, y = emb(near), emb(near + shift)
        m = torch.linalg.lstsq(x, y, driver="gelsd").solution  # (d, d): y ≈ x @ m
        in_window = float((x @ m - y).norm() / y.norm())
        xf, yf = emb(distant), emb(distant + shift)
        far_window = float((xf @ m - yf).norm() / yf.norm())
        m_far = torch.linalg.lstsq(xf, yf, driver="gelsd").solution
        rows.append((delta, in_window, far_window, float((m - m_far).norm() / m.norm())))
        matrices[delta] = m
        worst = max(worst, in_window, far_window, rows[-1][3])
    return Measurement(
        "C4",
        "PE(pos+Δ) = M_Δ·PE(pos): M_Δ fitted near 0 holds far away",
        worst,
        1e-5,
        note=f"Δ ∈ {deltas}, {len(near)} positions, far window +{far}",
        curves={"rows": rows, "matrix": matrices[deltas[-1]], "delta": deltas[-1]},
        kind="c4_shift",
    )


# ---------------------------------------------------------------------------------------- C9


def _rotate_pair(pe: PositionScheme, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """⟨R_m q, R_n k⟩ for (n, n_h, h_d) q, k and (n, 2[, ndim]) positions [m, n] -> (n, n_h)."""
    qq = torch.stack((q, torch.zeros_like(q)), 2)  # (n, n_h, 2, h_d): q at row 0
    kk = torch.stack((torch.zeros_like(k), k), 2)  # (n, n_h, 2, h_d): k at row 1
    rq, rk = pe.rotate_qk(qq, kk, pe.rotation(positions, q.dtype))
    return (rq[:, :, 0] * rk[:, :, 1]).sum(-1)


def _random_qk(
    n: int, n_heads: int, head_dim: int, dtype: torch.dtype, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (n, n_h, h_d) queries and keys, drawn in float64 so both dtypes see the same ones."""
    q = torch.randn(n, n_heads, head_dim, generator=generator, dtype=torch.float64)
    k = torch.randn(n, n_heads, head_dim, generator=generator, dtype=torch.float64)
    return q.to(dtype), k.to(dtype)


def _random_positions(pe: PositionScheme, n: int, top: int, generator: torch.Generator) -> torch.Tensor:
    shape = (n, 2) if pe.ndim == 1 else (n, 2, pe.ndim)
    return torch.randint(0, top, shape, generator=generator)


def relative_invariance(
    pe: PositionScheme,
    head_dim: int,
    dtype: torch.dtype,
    *,
    n_heads: int = 1,
    top: int = 1024,
    n: int = 4096,
    seed: int = 0,
) -> Measurement:
    """C9: |⟨R_{m+t} q, R_{n+t} k⟩ − ⟨R_m q, R_n k⟩| / (‖q‖‖k‖), max over random q, k, m, n, t.

    Positions and shifts are below ``top`` on every axis; ``n_heads`` heads (a scheme with
    per-head frequencies needs its own count), the max over them. Tolerance 8·ε32·2·top: a
    scheme may keep its angles m·θ in float32 whatever the dtype of q and k (Hugging Face's
    Llama does), and each such angle carries a rounding error up to ε32·|m·θ| with θ ≤ 1.
    """
    g = torch.Generator().manual_seed(seed)
    q, k = _random_qk(n, n_heads, head_dim, dtype, g)
    pos = _random_positions(pe, n, top, g)
    shift = torch.randint(0, top, (n, 1) + pos.shape[2:], generator=g)
    with torch.no_grad():
        base = _rotate_pair(pe, q, k, pos).double()
        moved = _rotate_pair(pe, q, k, pos + shift).double()
    scale = q.double().norm(dim=-1) * k.double().norm(dim=-1)
    err = ((moved - base).abs() / scale).amax(1)  # (n,): the worst head
    offset = (pos[:, 1] - pos[:, 0]) if pe.ndim == 1 else (pos[:, 1] - pos[:, 0]).abs().sum(-1)
    name = "(Δrow, Δcol)" if pe.ndim == 2 else "n − m"
    return Measurement(
        "C9",
        f"⟨R_m q, R_n k⟩ depends only on {name} ({_dtype_name(dtype)})",
        float(err.max()),
        8 * EPS32 * 2 * top,
        note=f"{n} random q, k, positions and shifts below {top}",
        curves={"offset": offset.numpy(), "error": err.numpy(), "dtype": _dtype_name(dtype)},
        kind="c9_relative",
    )


def norm_preservation(
    pe: PositionScheme,
    head_dim: int,
    dtype: torch.dtype,
    *,
    n_heads: int = 1,
    top: int = 1024,
    n: int = 4096,
    seed: int = 1,
) -> Measurement:
    """C9: |‖R_m q‖·‖R_m k‖ / (‖q‖·‖k‖) − 1|, max over random q, k, m.

    The product at one position, so that a scheme that scales q by ζ^m and k by ζ^−m while it
    rotates them (xPos) keeps it too. Tolerance 1e-5: cos and sin may be float32 tables (cos² +
    sin² = 1 to ~ε32) whatever the dtype of q and k.
    """
    g = torch.Generator().manual_seed(seed)
    q, k = _random_qk(n, n_heads, head_dim, dtype, g)
    pos = _random_positions(pe, n, top, g)
    pos = pos[:, :1].expand_as(pos)  # q and k rows at the same position m
    qk = torch.stack((q, k), 2)  # (n, n_h, 2, h_d): q at row 0, k at row 1
    with torch.no_grad():
        rq, rk = pe.rotate_qk(qk, qk, pe.rotation(pos, dtype))
    ratio = rq[:, :, 0].double().norm(dim=-1) * rk[:, :, 1].double().norm(dim=-1)
    ratio = ratio / (q.double().norm(dim=-1) * k.double().norm(dim=-1))  # (n, n_h)
    err = (ratio - 1).abs().amax(1)
    return Measurement(
        "C9",
        f"rotation keeps norms: ‖R_m q‖‖R_m k‖ = ‖q‖‖k‖ ({_dtype_name(dtype)})",
        float(err.max()),
        1e-5,
        note=f"{n} random q, k, positions below {top}",
        curves={"position": pos[:, 0].reshape(n, -1)[:, 0].numpy(), "error": err.numpy(), "dtype": _dtype_name(dtype)},
        kind="c9_norm",
    )


def values_untouched(
    pe: PositionScheme,
    head_dim: int,
    *,
    n_heads: int = 2,
    attention: type[Attention] = Attention,
    seq_len: int = 16,
    seed: int = 2,
) -> Measurement:
    """C9: the attention output equals softmax(R q · R k / √h_d)·V with V as projected.

    Runs posenc's ``Attention`` (or ``attention``) with the scheme and recomputes it by hand
    from its own projections, rotating only Q and K. Measured: max |difference| / max |output|;
    tolerance 1e-5 (float32 matmul rounding).
    """
    with torch.random.fork_rng():  # seeded weights without touching the caller's RNG
        torch.manual_seed(seed)
        attn = attention(n_heads * head_dim, n_heads, n_heads, head_dim)
        x = torch.randn(1, seq_len if pe.ndim == 1 else int(math.isqrt(seq_len)) ** 2, n_heads * head_dim)
    s = x.shape[1]
    positions = _positions(pe.ndim, s)
    with torch.no_grad():
        rotation = pe.rotation(positions, x.dtype)
        out = attn(x, pe, rotation, None, causal=False)
        q = attn.q(x).view(1, s, n_heads, head_dim).transpose(1, 2)  # (1, n_h, s, h_d)
        k = attn.k(x).view(1, s, n_heads, head_dim).transpose(1, 2)  # (1, n_h, s, h_d)
        v = attn.v(x).view(1, s, n_heads, head_dim).transpose(1, 2)  # (1, n_h, s, h_d)
        q, k = pe.rotate_qk(q, k, rotation)
        weights = F.softmax(q @ k.transpose(-1, -2) / math.sqrt(head_dim), dim=-1)  # (1, n_h, s, s)
        ref = attn.o((weights @ v).transpose(1, 2).reshape(1, s, n_heads * head_dim))  # (1, s, d)
    err = float((out - ref).abs().max() / ref.abs().max())
    return Measurement(
        "C9",
        "only Q and K rotate: attention output uses V unrotated",
        err,
        1e-5,
        note=f"posenc Attention, {n_heads} heads, {s} tokens",
        kind="c9_values",
    )


def bias_offset_only(pe: PositionScheme, *, count: int = 48) -> Measurement:
    """C8/C9: bias(i, j) is a function of the offset i − j (row and column offsets in 2D).

    Entries with the same offset are grouped; measured: the largest spread (max − min) within a
    group, over every head, relative to max |bias|. Non-finite entries (a mask) must agree too.
    Tolerance 1e-6 (float32 rounding of the same number computed twice).
    """
    positions = _positions(pe.ndim, count)
    with torch.no_grad():
        bias = pe.bias(positions, positions).detach().double()
    s = positions.shape[0]
    bias = bias.reshape(-1, s, s)  # (heads, s, s)
    offsets = (positions[:, None] - positions[None, :]).reshape(s * s, -1)  # (s², ndim)
    _, group = torch.unique(offsets, dim=0, return_inverse=True)
    finite = bias.isfinite()
    values = torch.where(finite, bias, torch.zeros_like(bias)).reshape(bias.shape[0], s * s)
    flags = finite.double().reshape(bias.shape[0], s * s)
    n_groups = int(group.max()) + 1

    def spread(v: torch.Tensor) -> torch.Tensor:
        idx = group.expand_as(v)
        hi = torch.full((v.shape[0], n_groups), -math.inf, dtype=v.dtype).scatter_reduce(1, idx, v, "amax")
        lo = torch.full((v.shape[0], n_groups), math.inf, dtype=v.dtype).scatter_reduce(1, idx, v, "amin")
        return hi - lo

    scale = float(values.abs().max()) or 1.0
    worst = max(float(spread(values).max()) / scale, float(spread(flags).max()))
    return Measurement(
        "C8",
        "bias(i, j) depends only on i − j" + (" (Δrow, Δcol)" if pe.ndim == 2 else ""),
        worst,
        1e-6,
        note=f"{s} positions, {bias.shape[0]} heads",
        curves={"bias": bias[0].numpy()},
        kind="c8_bias",
    )


# --------------------------------------------------------------------------------------- C10


def rotation_frequencies(pe: PositionScheme, head_dim: int, n_heads: int = 1) -> torch.Tensor:
    """The angles θ_k (descending, one per rotated pair; 0 for pairs left alone) of a 1D scheme.

    G = R_0ᵀR_1 is probed with basis vectors through ``rotate_qk``; its eigenvalues are
    e^{±iθ_k} (times a scale for xPos), so |arg| of them, sorted, gives every θ_k twice. With
    per-head frequencies, those of head 0.
    """
    probes = torch.eye(head_dim, dtype=torch.float64)[:, None, None].expand(head_dim, n_heads, 2, head_dim)
    with torch.no_grad():
        rq, rk = pe.rotate_qk(probes.clone(), probes.clone(), pe.rotation(torch.tensor([0, 1]), torch.float64))
    g = rq[:, 0, 0] @ rk[:, 0, 1].T  # (h_d, h_d): ⟨R_0 e_a, R_1 e_b⟩
    angles = torch.linalg.eigvals(g).angle().abs().sort(descending=True).values
    return angles[::2]


def relative_upper_bound(thetas: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
    """RoFormer eq. (37): (1/(d/2))·Σ_j |S_j|, S_j = Σ_{k<j} e^{iΔθ_k}, for each Δ -> (n,)."""
    phase = torch.polar(
        torch.ones(len(distances), len(thetas), dtype=torch.float64), distances.double()[:, None] * thetas[None]
    )  # (n, d/2)
    return phase.cumsum(-1).abs().mean(-1)


def long_term_decay(pe: PositionScheme, head_dim: int, *, n_heads: int = 1, max_distance: int = 1024) -> Measurement:
    """C10: mean relative upper bound over Δ ∈ [D/2, D] divided by its value at Δ = 0.

    Tolerance 0.5: the bound has to lose at least half of its height far away. With RoPE's
    frequencies θ_k = 10000^(−2k/d) it falls well below; with one repeated frequency it never
    falls (|S_j| = j for every Δ).
    """
    thetas = rotation_frequencies(pe, head_dim, n_heads)
    distances = torch.arange(max_distance + 1)
    bound = relative_upper_bound(thetas, distances)
    ratio = float(bound[max_distance // 2 :].mean() / bound[0])
    return Measurement(
        "C10",
        "long-term decay: mean bound over Δ∈[D/2,D] / bound(0)",
        ratio,
        0.5,
        note=f"RoFormer §3.4.3, D={max_distance}, {len(thetas)} frequencies",
        curves={"distance": distances.numpy(), "bound": bound.numpy()},
        kind="c10_decay",
    )


def periodicity(
    pe: PositionScheme, head_dim: int, *, n_heads: int = 1, max_distance: int = 4096, eps: float = 0.05
) -> Measurement:
    """C10: one frequency comes back to its start, all of them together do not.

    Return distance r(Δ) = sqrt(mean_k |e^{iΔθ_k} − 1|²) / 2 ∈ [0, 1]. Measured: the smallest
    r(Δ) over 1 ≤ Δ ≤ D with all frequencies; it must stay ≥ ``eps`` while the fastest frequency
    alone has already come back below ``eps`` (else the check fails with measured 0).
    """
    thetas = rotation_frequencies(pe, head_dim, n_heads)
    distances = torch.arange(1, max_distance + 1, dtype=torch.float64)

    def ret(th: torch.Tensor) -> torch.Tensor:
        return (
            (torch.polar(torch.ones(len(distances), len(th), dtype=torch.float64), distances[:, None] * th[None]) - 1)
            .abs()
            .pow(2)
            .mean(-1)
        ).sqrt() / 2

    one, every = ret(thetas[:1]), ret(thetas)
    one_back = bool((one < eps).any())
    first = int(distances[(one < eps).nonzero()[0, 0]]) if one_back else None
    measured = float(every.min()) if one_back else 0.0
    return Measurement(
        "C10",
        "periodicity: all frequencies together never return (min r(Δ), Δ ≤ D)",
        measured,
        eps,
        at_most=False,
        note=f"θ_0={float(thetas[0]):.4g} returns at Δ={first}; D={max_distance}",
        curves={"distance": distances.numpy(), "one": one.numpy(), "all": every.numpy()},
        kind="c10_periodicity",
    )
