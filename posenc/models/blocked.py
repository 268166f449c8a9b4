"""Causal attention in blocks of queries, for bfloat16 on the CPU (``blocked_causal_attention``).

On a CPU without AMX (avx512_bf16 only: AMD Zen 4 here) SDPA's flash kernel runs bfloat16 at about
a fifth of the rate of one large bfloat16 matmul (torch 2.14), slower than in float32: it multiplies
(256, h_d) by (h_d, 512) tiles through oneDNN one call at a time. The same attention written as a few
large ``torch.mm`` calls, each a block of queries against every key it sees, runs at about half the
matmul rate; what remains is the softmax (a third of the time) and matmuls whose inner size is h_d.
The measured rates are in ``posenc bench --only bf16`` (``benchmarks/suite.py``).

Notation as in ``posenc.models.blocks``: b batch, s sequence length, n_h query heads, n_kv key/value
heads, r = n_h / n_kv query heads per key/value head, h_d head dimension.
"""

from __future__ import annotations

import torch

# Queries per block. Smaller blocks keep a block's scores (c·r rows of up to s keys) nearer the cache;
# larger ones make fewer, longer matmuls (at SmolLM2's shapes 128 was the fastest of 64, 128 and 256);
# under a causal mask a block also scores c/2 keys per query past the diagonal (1.5% of the work at 4k)
BLOCK_QUERIES = 128


def blocked_causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None, chunk: int = BLOCK_QUERIES
) -> torch.Tensor:
    """softmax(q·kᵀ·scale + causal mask)·v without an (s, s) tensor: (b, n_h, s, h_d) q and
    (b, n_kv, s, h_d) k, v (grouped-query heads: query head h reads key/value head h // r, as SDPA's
    ``enable_gqa``) -> (b, n_h, s, h_d), a view of a (b, s, n_h, h_d) tensor (the layout the output
    projection reads). ``scale`` defaults to 1/√h_d. No gradient: the blocks reuse one buffer.

    For each key/value head and each block of ``chunk`` queries, the r query heads sharing that
    head are stacked as rows (c·r, h_d) of one matmul against the keys up to the block's last query
    (e, h_d), so K and V are read once per block for all r heads. The scores are rounded to q's dtype
    before their softmax (as transformers' eager attention and SDPA's math kernel do in bfloat16;
    the softmax accumulates in float32), and the scale is folded into q first. Equal to SDPA's causal
    attention to bfloat16 rounding (tests/models/test_blocked.py).
    """
    b, n_h, s, h_d = q.shape
    n_kv = k.shape[1]
    r = n_h // n_kv
    scale = h_d**-0.5 if scale is None else scale
    # the r query heads of one key/value head at one position are adjacent rows
    rows = (q * scale).view(b, n_kv, r, s, h_d).transpose(2, 3).contiguous()  # (b, n_kv, s, r, h_d)
    k, v = k.contiguous(), v.contiguous()  # (b, n_kv, s, h_d): a head's keys are the rows of one matrix
    out = q.new_empty(b, s, n_kv, r, h_d)
    c = min(chunk, s)
    buffer = q.new_empty(c * r * s)  # every block's scores, written in place: no fresh block per call
    future = torch.ones(c, c, dtype=torch.bool, device=q.device).triu(1)  # key j > query i in a diagonal block
    for i in range(b):
        for g in range(n_kv):
            keys, values = k[i, g], v[i, g]  # (s, h_d)
            for start in range(0, s, c):
                stop = min(start + c, s)
                n = stop - start
                query = rows[i, g, start:stop].view(n * r, h_d)  # (c·r, h_d)
                w = torch.mm(query, keys[:stop].T, out=buffer[: n * r * stop].view(n * r, stop))  # (c·r, e)
                w.view(n, r, stop)[..., start:].masked_fill_(future[:n, None, :n], float("-inf"))
                torch.softmax(w, -1, out=w)
                out[i, start:stop, g] = torch.mm(w, values[:stop]).view(n, r, h_d)
    return out.view(b, s, n_h, h_d).transpose(1, 2)  # (b, n_h, s, h_d)


def runs_blocked(q: torch.Tensor, causal: bool = True) -> bool:
    """Whether ``blocked_causal_attention`` is the faster attention for ``q``: causal, bfloat16, on
    the CPU, with no gradient (it writes its blocks in place); SDPA everywhere else."""
    return causal and q.dtype == torch.bfloat16 and q.device.type == "cpu" and not torch.is_grad_enabled()
