"""The explicit construction every remap is checked against: the full (s, s) attention with each
(query, key) pair's remapped positions written out from the papers' definitions (not from the
remaps' views or pieces), q_i rotated to pos_q(i, j) and k_j to pos_k(i, j), one softmax, @ v."""

from __future__ import annotations

import torch

from posenc.pe.remap.base import RemapState
from posenc.pe.remap.dual_chunk import DualChunk
from posenc.pe.remap.rerope import LeakyReRoPE, ReRoPE
from posenc.pe.remap.self_extend import SelfExtend
from posenc.pe.remap.sinks import AttentionSinks


def pair_positions(remap, i: int, j: int) -> tuple[float, float] | None:
    """(pos_q, pos_k) of query i against key j ≤ i, or None when the key is not attended."""
    d = i - j
    if isinstance(remap, SelfExtend):
        g, w = remap.group, remap.window
        return (i, j) if d < w else (i // g + w - w // g, j // g)
    if isinstance(remap, LeakyReRoPE):
        w, k = remap.window, remap.k
        return (i, j) if d < w else (i / k + w * (1 - 1 / k), j / k)
    if isinstance(remap, ReRoPE):
        return (i, j) if d < remap.window else (remap.window, 0)
    if isinstance(remap, AttentionSinks):
        # the cache query i decodes with: the sinks, then the last `window` tokens, each at its slot
        cache = sorted(set(range(min(remap.n_sink, i + 1))) | set(range(max(0, i - remap.window + 1), i + 1)))
        return (len(cache) - 1, cache.index(j)) if j in cache else None
    if isinstance(remap, DualChunk):
        n, c = remap.chunk_len, remap.chunk_size
        apart = i // n - j // n
        q = i % n if apart == 0 else min(i % n + n, c) if apart == 1 else min(2 * n - 1, c)
        return q, j % n
    raise TypeError(type(remap).__name__)


def reference_attention(remap, pe, q, k, v, scale: float | None = None) -> torch.Tensor:
    """(b, n_h, s, h_d) q, (b, n_kv, s, h_d) k, v -> (b, n_h, s, h_d), every pair rotated on its own;
    ``scale`` on the scores (default 1/√h_d)."""
    b, n_h, s, h_d = q.shape
    rep = n_h // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # (b, n_h, s, h_d)
    pos_q = torch.zeros(s, s, dtype=torch.float64)
    pos_k = torch.zeros(s, s, dtype=torch.float64)
    seen = torch.zeros(s, s, dtype=torch.bool)
    for i in range(s):
        for j in range(i + 1):
            pair = pair_positions(remap, i, j)
            if pair is not None:
                pos_q[i, j], pos_k[i, j], seen[i, j] = pair[0], pair[1], True
    integral = bool((pos_q == pos_q.round()).all() and (pos_k == pos_k.round()).all())
    as_positions = (lambda t: t.long()) if integral else (lambda t: t)
    qq = q[:, :, :, None, :].expand(b, n_h, s, s, h_d).reshape(b, n_h, s * s, h_d)  # pair (i, j) row i·s + j
    kk = k[:, :, None, :, :].expand(b, n_h, s, s, h_d).reshape(b, n_h, s * s, h_d)
    rq = pe.rotate_qk(qq, qq, pe.rotation(as_positions(pos_q.flatten()), q.dtype))[0]
    rk = pe.rotate_qk(kk, kk, pe.rotation(as_positions(pos_k.flatten()), q.dtype))[1]
    scores = (rq * rk).sum(-1).view(b, n_h, s, s) * (h_d**-0.5 if scale is None else scale)  # (b, n_h, s, s)
    scores = scores.masked_fill(~seen, float("-inf"))
    return scores.softmax(-1) @ v


class ReferenceRemap:
    """Stands in for ``remap`` in a model: every layer's attention is ``reference_attention``."""

    active = True

    def __init__(self, remap) -> None:
        self.remap = remap
        self.name = remap.name

    def check(self, pe, scheme: str) -> None:
        self.remap.check(pe, scheme)

    def prepare(self, pe, positions, dtype, chunk):
        remap = self.remap

        class Reference(RemapState):
            def attend(self, q, k, v, scale=None):
                return reference_attention(remap, pe, q, k, v, scale)

        return Reference(pe, [], [], remap.pieces, chunk)
