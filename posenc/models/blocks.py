"""The Transformer block shared by every posenc model: pre-norm, RMSNorm, SDPA, SwiGLU.

Notation: b batch, s sequence length, d model width, n_h query heads, n_kv key/value heads,
h_d head dimension. The position scheme is not owned by a block: the model owns it, computes
its per-forward state once (rotation, bias) and passes scheme and state into every attention
call, so one scheme serves every layer and is saved once.

At long lengths a full (n_h, s, s) bias does not fit in memory (4 GiB at 16k tokens and 4 heads),
so attention can instead take the positions and a chunk size, and build the bias of ``chunk``
queries at a time (``chunked_bias_attention``); when the bias is a function of i − j over
contiguous positions (or, for FIRE, one per query row) its blocks are strided views of one
vector (or of per-chunk rows), never a gather. A per-key bias (…, n_h, 1, s) under a causal mask
(ALiBi's key-only form) needs no mask at all: it is folded into one extra Q/K dimension and the
fused causal kernel runs (``key_bias_attention``). A full bias that is being trained goes through
``bias_attention``, which on the CPU is faster than SDPA's fallback for a mask with a gradient,
causal in a few chunks of queries that score only the keys they see (``causal_bias_attention``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from posenc.models.blocked import blocked_causal_attention
from posenc.pe.base import PositionScheme, ScoreMod, float32, toeplitz_distances

# Queries per SDPA call when the bias blocks are views (``toeplitz_bias_attention``): they cost no
# memory, so a call can take many queries; under a causal mask a block wastes about chunk/2 keys
# per query, 3% of the work at 16k tokens
VIEW_CHUNK = 1024
# Queries per chunk of per-query-row bias blocks (``distance_rows_attention``), at most ROWS_CHUNK and
# at most ROWS_BLOCK_ELEMENTS bias entries (64 MiB in float32, the one buffer they are written into
# without a gradient). FIRE's forward against NoPE's, one thread: at 16k tokens 2.4x with 64-query
# chunks (SDPA with a mask is 1.4x slower on them), 2.1x with 256; at 4k 2.5x with 128, 2.9x with 256,
# 5.7x with 1024 (more query rows straddle a knot of the MLP as the chunk grows).
ROWS_CHUNK = 256
ROWS_BLOCK_ELEMENTS = 1 << 24


def init_weights(model: nn.Module, std: float, n_layers: int) -> None:
    """N(0, std²) matrices, the residual projections scaled by 1/sqrt(2·n_layers) (GPT-2), zero biases.

    Parameters of the position scheme (``pe.*``) keep their own initialisation.
    """
    for name, p in model.named_parameters():
        if name.startswith("pe."):
            continue
        if p.dim() >= 2:
            scale = 1 / math.sqrt(2 * n_layers) if name.endswith(("attn.o.weight", "mlp.down.weight")) else 1.0
            nn.init.normal_(p, std=std * scale)
        elif name.endswith(".bias"):
            nn.init.zeros_(p)


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32, as Llama does (Zhang & Sennrich 2019)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        # Σh²/d rather than Llama's h.pow(2).mean(): the same numbers, but pow's backward is a
        # second pow over (b, s, d); this norm runs 1.5x faster forward + backward
        h = h * torch.rsqrt((h * h).sum(-1, keepdim=True) / h.shape[-1] + self.eps)
        return self.weight * h.to(x.dtype)


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)) (Shazeer 2020, "GLU Variants Improve Transformer")."""

    def __init__(self, dim: int, hidden: int, bias: bool = False) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=bias)
        self.up = nn.Linear(dim, hidden, bias=bias)
        self.down = nn.Linear(hidden, dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


def bias_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """softmax(q·kᵀ/√h_d + mask)·v for q (b, n_h, s_q, h_d), k, v (b, n_h, s_k, h_d) and a float
    mask (…, n_h, s_q, s_k) with −inf on the keys not attended; every query row must keep a key.

    On the CPU SDPA's flash kernel has no gradient for the mask, so a mask that is trained sends SDPA
    to its math kernel, which also scans every row for being all −inf (``_safe_softmax``). Written
    out, with the mask added in place (one (b, n_h, s_q, s_k) buffer fewer), the same ops take about
    20% less time forward + backward at (32, 4, 128, 32). Anywhere else (no gradient; or CUDA, whose
    memory-efficient kernel has one) SDPA is the faster choice.
    """
    if q.device.type != "cpu" or not (mask.requires_grad and torch.is_grad_enabled()):
        # the CPU's flash kernel takes a 4D mask only; a 3D one (n_h, s_q, s_k) sends SDPA to its
        # math kernel, 5x slower at 2k tokens
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[(None,) * (4 - mask.dim())])
    scores = ((q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)).add_(mask)  # (b, n_h, s_q, s_k)
    return scores.softmax(dim=-1) @ v  # (b, n_h, s_q, h_d)


# Query chunks of a trained causal bias's attention written out (``causal_bias_attention``): each
# chunk scores only the keys it sees, so a causal attention does (n + 1)/2n of the full work.
# Forward + backward of one layer, one thread, (b, 4, s, 32) with b·s = 4096, n chunks against 1:
# s = 64 13.8 ms (2) vs 15.4; s = 128 18.6 (2) vs 27.9, 20.8 with 4; s = 256 30.0 (4) vs 52.4;
# s = 512 55.9 (4) vs 128.2, 58.9 with 8 (NoPE's fused SDPA: 14.3, 20.6, 35.0, 71.3). More chunks
# cost more small calls than they save.
CAUSAL_CHUNK_QUERIES = 64
CAUSAL_CHUNKS_MAX = 4


def causal_bias_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """softmax(q·kᵀ/√h_d + bias + causal mask)·v for q, k, v (b, n_h, s, h_d) and a full bias
    (…, n_h, s, s). A bias being trained on the CPU goes through ``bias_attention`` in 2 to
    ``CAUSAL_CHUNKS_MAX`` chunks of queries, each against the keys up to its last query only (the
    keys after it are all masked): 1.1x to 2.3x faster forward + backward than one call over
    every key, and faster than NoPE's fused kernel. Anywhere else one SDPA call with the bias
    masked."""
    s = q.shape[2]
    if q.device.type != "cpu" or not (bias.requires_grad and torch.is_grad_enabled()):
        future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        return bias_attention(q, k, v, bias.masked_fill(future, float("-inf")))
    n = min(CAUSAL_CHUNKS_MAX, max(2, s // CAUSAL_CHUNK_QUERIES), s)
    # scaled once, and k, v laid out by head: a chunk's slices then go to the matmuls uncopied
    q, k, v = q * q.shape[-1] ** -0.5, k.contiguous(), v.contiguous()
    out = []
    for start, stop in ((s * i // n, s * (i + 1) // n) for i in range(n)):
        future = torch.ones(stop - start, stop, dtype=torch.bool, device=q.device).triu(start + 1)  # j > i
        mask = bias[..., start:stop, :stop].masked_fill(future, float("-inf"))  # (…, n_h, c, stop)
        scores = (q[:, :, start:stop] @ k[:, :, :stop].transpose(-1, -2)).add_(mask)  # (b, n_h, c, stop)
        out.append((scores.softmax(dim=-1) @ v[:, :, :stop]).transpose(1, 2))  # (b, c, n_h, h_d)
    # token-major, as the output projection reads it (and as SDPA returns it): no copy there
    return torch.cat(out, dim=1).transpose(1, 2)  # (b, n_h, s, h_d)


def chunked_bias_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pe: PositionScheme,
    positions: torch.Tensor,
    chunk: int,
    causal: bool = True,
    view_chunk: int = VIEW_CHUNK,
    rows_elements: int = ROWS_BLOCK_ELEMENTS,
) -> torch.Tensor:
    """SDPA over ``chunk`` queries at a time, with ``pe.bias`` built for that chunk only.

    q, k, v are (b, n_h, s, h_d) and positions (s,) or (b, s); the result equals one SDPA with
    the full bias and causal mask. Under a causal mask the keys after a chunk's last query are
    never attended, so they are not scored at all. Peak memory is one (b, n_h, chunk, s) block.
    When the scheme's bias over these positions is a function of i − j (``pe.distance_bias``),
    ``toeplitz_bias_attention`` takes its blocks as views instead, ``view_chunk`` queries or more
    at a time; when it is one per query row (``pe.distance_rows``), ``distance_rows_attention``,
    in chunks of ``ROWS_CHUNK`` queries or ``rows_elements`` bias entries, whichever is fewer, or of
    ``chunk`` queries if that is more.
    """
    with float32(q.device):
        table = pe.distance_bias(positions)  # (n_h, 2s − 1) or None
    if table is not None:
        return toeplitz_bias_attention(q, k, v, table, max(chunk, view_chunk), causal)
    if positions.dim() == 1 and toeplitz_distances(positions) is not None:
        fits = min(ROWS_CHUNK, rows_elements // (q.shape[1] * q.shape[2]))  # queries the buffer holds
        out = distance_rows_attention(q, k, v, pe, positions, min(max(chunk, fits), q.shape[2]), causal)
        if out is not None:
            return out
    s = q.shape[2]
    out = []
    for start in range(0, s, chunk):
        stop = min(start + chunk, s)
        end = stop if causal else s
        with float32(q.device):
            mask = pe.bias(positions[..., start:stop], positions[..., :end])  # (…, n_h, c, e)
        mask = mask.to(q.dtype)
        if causal:
            future = torch.ones(stop - start, end, dtype=torch.bool, device=q.device).triu(start + 1)  # j > i
            mask = mask.masked_fill(future, float("-inf"))
        out.append(bias_attention(q[:, :, start:stop], k[:, :, :end], v[:, :, :end], mask))
    return torch.cat(out, dim=2)  # (b, n_h, s, h_d)


def toeplitz_bias_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, table: torch.Tensor, chunk: int, causal: bool = True
) -> torch.Tensor:
    """SDPA with the bias b_h(i − j) read from ``table`` (n_h, 2s − 1), entry m the distance
    m − (s − 1), over ``chunk`` queries at a time; equal to one SDPA with the full bias.

    With the keys in reverse order (j' = s − 1 − j) the bias of query i and key j' is
    table[i + j'], rising by one entry along both axes: every (chunk, keys) block is then an
    overlapping strided view of the one vector, no (s, s) bias and no gather ever exist, and
    the flash kernel reads the view in place. Attention sums over keys, so their order does not
    change the result. A causal mask is −inf at the distances below 0, written into the table.
    """
    s = q.shape[2]
    table = table.to(q.dtype)
    if causal:
        table = table.masked_fill(torch.arange(2 * s - 1, device=q.device) < s - 1, float("-inf"))  # j > i
    table = table.contiguous()  # (n_h, 2s − 1)
    k, v = k.flip(2), v.flip(2)  # (b, n_h, s, h_d), key j' = s − 1 − j
    n_h, head_stride, offset = table.shape[0], table.stride(0), table.storage_offset()
    out = []
    for start in range(0, s, chunk):
        stop = min(start + chunk, s)
        end = stop if causal else s  # keys j < end are j' >= s − end
        mask = table.as_strided((1, n_h, stop - start, end), (0, head_stride, 1, 1), offset + start + s - end)
        out.append(bias_attention(q[:, :, start:stop], k[:, :, s - end :], v[:, :, s - end :], mask))
    return torch.cat(out, dim=2)  # (b, n_h, s, h_d)


def distance_rows_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pe: PositionScheme,
    positions: torch.Tensor,
    chunk: int,
    causal: bool = True,
) -> torch.Tensor | None:
    """SDPA over ``chunk`` queries at a time with the bias rows of ``pe.distance_rows`` for
    contiguous (s,) positions; None when the scheme has none.

    A block of c queries from ``start`` against keys j < e needs the distances d = i − j from
    start − e + 1 to start + c − 1: rows Z (n_h, c, e + c − 1) with column t the distance
    t + start − e + 1. With the keys reversed (u = e − 1 − j) query r and key u are at distance
    r + u + start − e + 1, i.e. Z[r, r + u]: a strided view (row stride e + c), no copy.
    Without a gradient every chunk's rows are written into one buffer: a fresh block per chunk
    costs more in page faults than writing it.
    """
    _, n_h, s, _ = q.shape
    k, v = k.flip(2), v.flip(2)  # (b, n_h, s, h_d), key j' = s − 1 − j
    buffer = (
        None
        if torch.is_grad_enabled()
        else torch.empty(n_h * chunk * (s + chunk - 1), device=q.device, dtype=torch.float32)
    )
    out = []
    for start in range(0, s, chunk):
        stop = min(start + chunk, s)
        c, end = stop - start, stop if causal else s
        first = start - end + 1  # distance of column 0
        into = None if buffer is None else buffer[: n_h * c * (end + c - 1)].view(n_h, c, end + c - 1)
        with float32(q.device):
            rows = pe.distance_rows(positions[start:stop], torch.arange(first, stop, device=q.device), out=into)
        if rows is None:
            return None
        rows = rows.to(q.dtype).contiguous()  # (n_h, c, e + c − 1)
        if causal:
            rows[..., :-first] = float("-inf")  # distances below 0: keys after the query
        width = rows.shape[-1]
        mask = rows.as_strided((1, rows.shape[0], c, end), (0, c * width, width + 1, 1), rows.storage_offset())
        out.append(bias_attention(q[:, :, start:stop], k[:, :, s - end :], v[:, :, s - end :], mask))
    return torch.cat(out, dim=2)  # (b, n_h, s, h_d)


# The attentions a model can run; ``select_attention`` picks one when the model is built
ATTENTION_BACKENDS = ("sdpa", "blocked_causal", "sdpa_key_bias", "sdpa_bias", "flex")


def select_attention(
    pe: PositionScheme,
    device: torch.device,
    causal: bool,
    bias_chunk: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> str:
    """The attention a model runs, from what its scheme and the model declare; models call it once
    when they are built (and again when moved to another device) and keep the name in
    ``attention_backend``.

    * ``sdpa``: the scheme adds no bias: fused SDPA (its flash or memory-efficient kernel on CUDA,
      its flash kernel on the CPU), grouped-query heads included.
    * ``blocked_causal``: the same, causal, in bfloat16 on the CPU: blocks of queries against the keys
      they see as large matmuls (``posenc.models.blocked``), 2x SDPA's flash kernel there; a forward
      with a gradient runs SDPA.
    * ``sdpa_key_bias``: a causal model whose scheme has a per-key form of its bias
      (``has_key_bias``: ALiBi) and no ``bias_chunk`` asked for: the bias folded into one extra
      Q/K dimension, fused causal SDPA with no mask (``key_bias_attention``). A forward where that
      form is not exact (positions that decrease, a dtype below float32) takes ``sdpa_bias``'s path.
    * ``flex``: a bias on CUDA: compiled ``flex_attention``, the bias added in a score_mod (no
      (s, s) mask in memory); past the full-bias length a scheme without a score_mod is chunked.
    * ``sdpa_bias``: a bias anywhere else: SDPA with the bias as its mask, one full bias at short
      lengths, built per chunk of queries at long ones (``chunked_bias_attention``). On the CPU
      flex_attention does not pay off: compiled, its first call takes ~55 s and each call then
      4x SDPA's time at 4k tokens (torch 2.14, two cores), and it has no backward there.
    """
    if not pe.adds_bias:
        return "blocked_causal" if causal and dtype == torch.bfloat16 and device.type == "cpu" else "sdpa"
    if causal and pe.has_key_bias and bias_chunk is None:
        return "sdpa_key_bias"
    return "flex" if device.type == "cuda" else "sdpa_bias"


_BLOCK_MASKS: dict[tuple[int, str], Any] = {}  # causal block masks by (length, device)
_COMPILED_FLEX: list[Any] = []  # torch.compile(flex_attention), built on first use


def flex_bias_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor | ScoreMod,
    causal: bool,
    compiled: bool | None = None,
) -> torch.Tensor:
    """softmax(q·kᵀ/√h_d + bias)·v through ``flex_attention``, the bias added inside its score_mod:
    a scheme's own score_mod (``pe.score_mod``), or a full (…, n_h, s, s) bias read there; causal
    masking is a block mask, so masked blocks are skipped. q, k, v are (b, n_h, s, h_d).
    ``compiled`` (default: on CUDA) runs the fused kernel; eager flex_attention is the unfused
    reference, used to test this path on the CPU (no backward there).
    """
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    s = q.shape[2]
    score_mod = bias if callable(bias) else full_score_mod(bias)
    block_mask = None
    if causal:
        key = (s, str(q.device))
        if key not in _BLOCK_MASKS:
            _BLOCK_MASKS[key] = create_block_mask(lambda batch, head, i, j: i >= j, None, None, s, s, device=q.device)
        block_mask = _BLOCK_MASKS[key]
    if compiled is None:
        compiled = q.device.type == "cuda"
    if compiled and not _COMPILED_FLEX:
        _COMPILED_FLEX.append(torch.compile(flex_attention, dynamic=False))
    return (_COMPILED_FLEX[0] if compiled else flex_attention)(q, k, v, score_mod=score_mod, block_mask=block_mask)


def full_score_mod(bias: torch.Tensor) -> ScoreMod:
    """The score_mod adding a full (…, n_h, s, s) bias (leading dims 1 or the batch)."""
    full = bias.reshape(-1, *bias.shape[-3:])  # (1 or b, n_h, s, s)
    if full.shape[0] == 1:
        shared = full[0]  # indexed by tensors only: torch < 2.9 cannot trace a Python int among them

        def score_mod(score, batch, head, i, j):
            return score + shared[head, i, j]
    else:

        def score_mod(score, batch, head, i, j):
            return score + full[batch, head, i, j]

    return score_mod


def key_bias_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
    """Causal SDPA plus a per-key bias β_h(j) with no (s, s) mask: q' = [q, √h_d], k' = [k, β],
    v' = [v, 0] and softmax scale 1/√h_d give scores q·k/√h_d + β_h(j), so the fused ``is_causal``
    kernel (O(s) memory) runs. q, k, v are (b, n_h, s, h_d), ``key_bias`` (…, n_h, 1, s).
    """
    b, n_h, s, h_d = q.shape
    beta = key_bias.to(q.dtype).expand(b, n_h, 1, s).transpose(-1, -2)  # (b, n_h, s, 1)
    q = torch.cat((q, torch.full_like(beta, h_d**0.5)), dim=-1)  # (b, n_h, s, h_d+1)
    k = torch.cat((k, beta), dim=-1)  # (b, n_h, s, h_d+1)
    v = torch.cat((v, torch.zeros_like(beta)), dim=-1)  # (b, n_h, s, h_d+1): fused kernels want one h_d
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=h_d**-0.5)[..., :h_d]


@dataclass
class LayerCache:
    """One layer's keys and values of every token so far, (b, n_kv, t, h_d) each: a decoding step
    computes its new tokens' projections only and attends to these. Under RoPE alone the keys are
    kept rotated, each once, at its own position; under a remap they are kept before RoPE, and
    every step rotates them as the remap's views see them then, as a full forward would. The
    tokens live in buffers that grow by doubling, so a step writes its own and copies none of the
    others."""

    keys: torch.Tensor | None = None  # (b, n_kv, capacity, h_d)
    values: torch.Tensor | None = None
    length: int = 0

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' (b, n_kv, m, h_d) k and v; every token's, (b, n_kv, t, h_d) views."""
        t = self.length + k.shape[2]
        if self.keys is None or t > self.keys.shape[2]:
            grown = []
            for old, new in ((self.keys, k), (self.values, v)):
                buffer = new.new_empty(*new.shape[:2], max(t, 2 * self.length), new.shape[3])
                if old is not None:
                    buffer[:, :, : self.length] = old[:, :, : self.length]
                grown.append(buffer)
            self.keys, self.values = grown
        self.keys[:, :, self.length : t] = k
        self.values[:, :, self.length : t] = v
        self.length = t
        return self.keys[:, :, :t], self.values[:, :, :t]

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` tokens (those after them were never decoded)."""
        self.length = min(self.length, length)


def cached_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    remap: Any = None,
    scale: float | None = None,
    window: int | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """(b, n_h, m, h_d) queries of the last m of t tokens against every token's (b, n_kv, t, h_d) k
    and v -> (b, n_h, m, h_d): a decoding step. q and k come rotated (or, in a layer without RoPE,
    need no rotation), unless a remap's state is given: then both are unrotated and the remap's
    views rotate them. ``scale`` on the scores (default 1/√h_d); ``window``: query i sees only keys
    j > i − w (a sliding-window layer; only those are read); ``softcap``: scores c·tanh(score / c)."""
    b, n_h, m, h_d = q.shape
    n_kv, t = k.shape[1], k.shape[2]
    if remap is not None:  # the remap's views of the last m queries
        return remap.attend(q, k, v)
    first = max(0, t - m - window + 1) if window else 0  # the first key the first query sees
    k, v = k[:, :, first:], v[:, :, first:]  # (b, n_kv, e, h_d)
    scale = h_d**-0.5 if scale is None else scale
    # Two matmuls and a softmax, the heads of a group as rows against their shared keys: SDPA's CPU
    # kernel takes 6 ms per layer for one query against 4096 keys, tiled for long query blocks
    scores = ((q * scale).reshape(b, n_kv, n_h // n_kv * m, h_d) @ k.transpose(-1, -2)).float()
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    if m > 1:  # query i (position t − m + i) sees keys j ≤ t − m + i (and, in a window, j > t − m + i − w)
        i = torch.arange(t - m, t, device=q.device)[:, None]
        j = torch.arange(first, t, device=q.device)[None, :]
        hidden = (j > i) | ((i - j >= window) if window else False)  # (m, e)
        scores = scores.view(b, n_kv, -1, m, t - first).masked_fill_(hidden, float("-inf")).view_as(scores)
    return (scores.softmax(-1).to(v.dtype) @ v).view(b, n_h, m, h_d)  # (b, n_h, m, h_d)


class Attention(nn.Module):
    """Multi-head (or grouped-query) attention through ``F.scaled_dot_product_attention``.

    Q, K and V are three Linears, not one fused projection: fused, Q and K are strided views of
    one output and the RoPE model's training step measured 0.97x (interleaved, one thread, lm_tiny,
    32 x 128 tokens; NoPE 1.00x); fusing gate and up in the MLP measured 0.91x on its own.
    """

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int, head_dim: int, bias: bool = False) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.q = nn.Linear(dim, n_heads * head_dim, bias=bias)
        self.k = nn.Linear(dim, n_kv_heads * head_dim, bias=bias)
        self.v = nn.Linear(dim, n_kv_heads * head_dim, bias=bias)
        self.o = nn.Linear(n_heads * head_dim, dim, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        pe: PositionScheme,
        rotation: Any = None,
        bias: torch.Tensor | None = None,
        causal: bool = True,
        positions: torch.Tensor | None = None,
        chunk: int | None = None,
        backend: str = "sdpa",
        cache: LayerCache | None = None,
    ) -> torch.Tensor:
        """``backend``: the model's ``attention_backend`` (``select_attention``). ``bias``: a full
        (…, n_h, s, s) or per-key (…, n_h, 1, s) bias; or, when it is None and ``pe`` adds a bias,
        ``positions`` and ``chunk`` make attention build it per chunk of queries. ``cache``: the
        layer's keys and values so far, extended by these s tokens (``CausalLM.kv_cache``): RoPE's
        rotation then covers these s tokens only (the cached keys are rotated already), a remap's
        state and the positions every token, the cached ones first."""
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)  # (b, n_h, s, h_d)
        k = self.k(x).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (b, n_kv, s, h_d)
        v = self.v(x).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (b, n_kv, s, h_d)
        if cache is not None:
            remap = rotation if backend == "remap" else None  # its views rotate the cached keys each step
            if rotation is not None and remap is None:  # rotated once, at their positions, and cached so
                q, k = pe.rotate_qk(q, k, rotation)
                rotation = None
            k, v = cache.extend(k, v)  # (b, n_kv, t, h_d): the cached tokens', then these
            if k.shape[2] > s:  # a decoding step after cached tokens
                y = cached_attention(q, k, v, remap)
                return self.o(y.transpose(1, 2).reshape(b, s, self.n_heads * self.head_dim))  # (b, s, d)
        if backend == "remap":  # posenc.pe.remap: ``rotation`` is its state, which rotates q and k per view
            if rotation is None:  # a layer without RoPE (pe.nope_layers) attends as trained
                y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=k.shape[1] != q.shape[1])
            else:
                y = rotation.attend(q, k, v)
            return self.o(y.transpose(1, 2).reshape(b, s, self.n_heads * self.head_dim))  # (b, s, d)
        if rotation is not None:
            q, k = pe.rotate_qk(q, k, rotation)
        if backend == "blocked_causal" and not torch.is_grad_enabled():  # it groups the heads itself
            y = blocked_causal_attention(q, k, v)
            return self.o(y.transpose(1, 2).reshape(b, s, self.n_heads * self.head_dim))  # (b, s, d)
        if backend == "blocked_causal":  # with a gradient: SDPA (the blocks are written in place)
            backend = "sdpa"
        if self.n_kv_heads != self.n_heads and backend != "sdpa":  # plain SDPA groups the heads itself
            rep = self.n_heads // self.n_kv_heads
            k = k.repeat_interleave(rep, dim=1)  # (b, n_h, s, h_d)
            v = v.repeat_interleave(rep, dim=1)  # (b, n_h, s, h_d)
        if backend == "sdpa":
            if bias is not None:
                raise ValueError(
                    "attention_backend 'sdpa' adds no bias; the model selected it for a scheme without one"
                )
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=k.shape[1] != q.shape[1])
        elif backend == "sdpa_key_bias" and bias is not None and bias.shape[-2] == 1:
            y = key_bias_attention(q, k, v, bias)
        elif backend == "flex":
            score_mod = bias
            if bias is None:  # one call over the whole sequence, the bias computed inside the kernel
                with float32(q.device):
                    score_mod = pe.score_mod(positions)
            if score_mod is None:
                y = chunked_bias_attention(q, k, v, pe, positions, chunk or s, causal)
            else:
                y = flex_bias_attention(q, k, v, score_mod, causal)
        elif bias is None:  # sdpa_bias (or the per-key form's fallback): the bias built per chunk
            y = chunked_bias_attention(q, k, v, pe, positions, chunk or s, causal)
        else:
            mask = bias.to(q.dtype)
            y = causal_bias_attention(q, k, v, mask) if causal else bias_attention(q, k, v, mask)
        return self.o(y.transpose(1, 2).reshape(b, s, self.n_heads * self.head_dim))  # (b, s, d)


class Block(nn.Module):
    """x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(
        self,
        dim: int,
        n_heads: int,
        n_kv_heads: int,
        head_dim: int,
        mlp_hidden: int,
        norm_eps: float = 1e-5,
        attention_bias: bool = False,
        mlp_bias: bool = False,
    ) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(dim, norm_eps)
        self.attn = Attention(dim, n_heads, n_kv_heads, head_dim, attention_bias)
        self.mlp_norm = RMSNorm(dim, norm_eps)
        self.mlp = SwiGLU(dim, mlp_hidden, mlp_bias)

    def forward(
        self,
        x: torch.Tensor,
        pe: PositionScheme,
        rotation: Any,
        bias: torch.Tensor | None,
        causal: bool,
        positions: torch.Tensor | None = None,
        chunk: int | None = None,
        backend: str = "sdpa",
        cache: LayerCache | None = None,
    ) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), pe, rotation, bias, causal, positions, chunk, backend, cache)
        return x + self.mlp(self.mlp_norm(x))
