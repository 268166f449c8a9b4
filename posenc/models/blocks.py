"""The Transformer block shared by every posenc model: pre-norm, RMSNorm, SDPA, SwiGLU.

Notation: b batch, s sequence length, d model width, n_h query heads, n_kv key/value heads,
h_d head dimension. The position scheme is not owned by a block: the model owns it, computes
its per-forward state once (rotation, bias) and passes scheme and state into every attention
call, so one scheme serves every layer and is saved once.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from posenc.pe.base import PositionScheme


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
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
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


class Attention(nn.Module):
    """Multi-head (or grouped-query) attention through ``F.scaled_dot_product_attention``."""

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
    ) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)  # (b, n_h, s, h_d)
        k = self.k(x).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (b, n_kv, s, h_d)
        v = self.v(x).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (b, n_kv, s, h_d)
        if rotation is not None:
            q, k = pe.rotate_qk(q, k, rotation)
        if self.n_kv_heads != self.n_heads:
            rep = self.n_heads // self.n_kv_heads
            k = k.repeat_interleave(rep, dim=1)  # (b, n_h, s, h_d)
            v = v.repeat_interleave(rep, dim=1)  # (b, n_h, s, h_d)
        if bias is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        else:
            mask = bias.to(q.dtype)
            if causal:
                future = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
                mask = mask.masked_fill(future, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
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

    def forward(self, x: torch.Tensor, pe: PositionScheme, rotation: Any, bias: torch.Tensor | None, causal: bool) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), pe, rotation, bias, causal)
        return x + self.mlp(self.mlp_norm(x))
