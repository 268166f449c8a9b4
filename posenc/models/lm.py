"""Tiny causal language model: token embedding, pre-norm blocks, tied output (Llama-shaped).

The position scheme is a constructor argument (dependency injection, as torchtune passes
``pos_embeddings`` into attention); the model never decides where positions act.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc.errors import ConfigError
from posenc.models.blocks import Block, RMSNorm, init_weights
from posenc.pe.base import PositionScheme, default_positions


class CausalLM(nn.Module):
    """Decoder-only LM over a byte (or any small) vocabulary.

    Shapes: b batch, s sequence length, d width, V vocabulary.
    """

    def __init__(
        self,
        pe: PositionScheme,
        vocab_size: int = 256,
        d_model: int = 128,
        n_layers: int = 4,
        n_heads: int = 4,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        mlp_hidden: int | None = None,
        norm_eps: float = 1e-5,
        tie_embeddings: bool = True,
        attention_bias: bool = False,
        mlp_bias: bool = False,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        n_kv_heads = n_kv_heads or n_heads
        if head_dim is None:
            if d_model % n_heads:
                raise ConfigError(f"model.d_model={d_model} is not divisible by model.n_heads={n_heads}")
            head_dim = d_model // n_heads
        if n_heads % n_kv_heads:
            raise ConfigError(f"model.n_heads={n_heads} is not divisible by model.n_kv_heads={n_kv_heads}")
        if pe.ndim != 1:
            raise ConfigError(
                f"pe '{type(pe).__name__}' is a 2D scheme for image patches; the causal LM takes a 1D "
                "scheme (nope, learned, sinusoidal, rope)"
            )
        self.pe = pe
        self.vocab_size, self.d_model, self.n_heads, self.head_dim = vocab_size, d_model, n_heads, head_dim
        mlp_hidden = mlp_hidden or 32 * math.ceil(8 * d_model / 3 / 32)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, n_kv_heads, head_dim, mlp_hidden, norm_eps, attention_bias, mlp_bias)
            for _ in range(n_layers)
        )
        self.norm = RMSNorm(d_model, norm_eps)
        self.head = None if tie_embeddings else nn.Linear(d_model, vocab_size, bias=False)
        self._init(init_std, n_layers)

    def _init(self, std: float, n_layers: int) -> None:
        init_weights(self, std, n_layers)

    def forward(self, idx: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """(b, s) token ids, optional (s,) or (b, s) positions -> (b, s, V) logits."""
        _, s = idx.shape
        if positions is None:
            positions = default_positions(s, idx.device)
        x = self.embed(idx)  # (b, s, d)
        pe = self.pe
        if pe.adds_embedding:
            x = x + pe.embedding(positions).to(x.dtype)  # (b, s, d)
        rotation = pe.rotation(positions, x.dtype) if pe.rotates_qk else None
        bias = pe.bias(positions, positions) if pe.adds_bias else None  # (…, n_h, s, s)
        for block in self.blocks:
            x = block(x, pe, rotation, bias, causal=True)
        x = self.norm(x)
        return x @ self.embed.weight.T if self.head is None else self.head(x)  # (b, s, V)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
