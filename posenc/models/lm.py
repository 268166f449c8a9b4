"""Tiny causal language model: token embedding, pre-norm blocks, tied output (Llama-shaped).

The position scheme is a constructor argument (dependency injection, as torchtune passes
``pos_embeddings`` into attention); the model never decides where positions act. The attention
it runs is chosen once, from the scheme and the model (``posenc.models.blocks.select_attention``),
and named in ``attention_backend``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from posenc.core.errors import ConfigError
from posenc.models.blocks import Block, LayerCache, RMSNorm, init_weights, select_attention
from posenc.pe.base import PositionScheme, default_positions, float32, randomized_positions
from posenc.pe.remap.base import NoRemap, Remap, remap_chunk
from posenc.pe.rope import RoPE
from posenc.pe.scaling import NoScale
from posenc.tasks.base import IGNORE_INDEX

# Elements of one (b, n_h, queries, keys) attention block above which a bias is built per chunk
# of queries: 16 MiB in float32, so a bias never costs more than a few such blocks at any length.
BIAS_BLOCK_ELEMENTS = 1 << 22


def chunked_cross_entropy(
    x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int, softcap: float | None = None
) -> torch.Tensor:
    """(b, s, d) final hidden states, (V, d) head, (b, s) targets -> (b, s) float32 losses.

    Logits exist for ``chunk`` positions at a time only; ``IGNORE_INDEX`` targets score 0.
    ``softcap``: logits c·tanh(logits / c) first (Gemma 2's final soft-capping).
    """
    if chunk < 1:
        raise ConfigError(f"chunk must be >= 1, got {chunk}")
    out = torch.zeros(targets.shape, dtype=torch.float32, device=x.device)
    # Without a gradient every chunk's float32 logits and their log-softmax share one buffer: a fresh
    # (b, chunk, V) block per chunk (200 MB for 1024 positions of a 49k vocabulary) costs more in
    # page faults than the log-softmax itself. bfloat16 logits (without soft-capping, which runs in
    # float32) get a buffer of their own, and their log-softmax is written in float32 into the other
    size = x.shape[0] * min(chunk, x.shape[1]) * weight.shape[0]
    reuse = x.dtype == weight.dtype and not torch.is_grad_enabled()
    reuse = reuse and (x.dtype == torch.float32 or (x.dtype == torch.bfloat16 and not softcap))
    buffer = torch.empty(size, dtype=torch.float32, device=x.device) if reuse else None
    narrow = x.new_empty(size) if reuse and x.dtype == torch.bfloat16 else buffer  # the head's own dtype
    for i in range(0, x.shape[1], chunk):
        h, t = x[:, i : i + chunk], targets[:, i : i + chunk]  # (b, c, d), (b, c)
        if buffer is not None:
            n = t.numel() * weight.shape[0]
            logits = torch.matmul(h, weight.T, out=narrow[:n].view(*t.shape, -1))  # (b, c, V)
            if softcap:
                logits.div_(softcap).tanh_().mul_(softcap)
            logp = torch.log_softmax(logits, -1, dtype=torch.float32, out=buffer[:n].view(*t.shape, -1))
            picked = logp.gather(-1, t.clamp(min=0)[..., None])[..., 0]  # (b, c) log p of each target
            out[:, i : i + chunk] = picked.neg_().masked_fill_(t == IGNORE_INDEX, 0)
            continue
        logits = (h @ weight.T).float()  # (b, c, V)
        if softcap:
            logits = torch.tanh(logits / softcap) * softcap
        # rows of (b·c, V): a transposed (b, V, c) input costs log_softmax a (b, c, V) copy more
        out[:, i : i + chunk] = F.cross_entropy(
            logits.flatten(0, 1), t.flatten(), ignore_index=IGNORE_INDEX, reduction="none"
        ).view(logits.shape[:2])
    return out


class KVCache(list):
    """Every layer's ``LayerCache``: the tokens a decoding step extends (``CausalLM.kv_cache``), and
    the RoPE frequencies and remap they were computed under."""

    state: tuple | None = None  # (inv_freq, attention_scaling, remap) of the cached tokens

    def check(self, pe: PositionScheme, remap: Remap | None) -> None:
        """Refuse a step under other frequencies or another remap than the cached tokens': their
        keys, and every later layer's hidden states, would be those of another model."""
        freqs = getattr(pe, "inv_freq", None)
        state = (None if freqs is None else freqs.detach().clone(), getattr(pe, "attention_scaling", None), remap)
        if self.length == 0 or self.state is None:
            self.state = state
            return
        (old_freqs, old_scaling, old_remap), (freqs, scaling, remap) = self.state, state
        same = old_remap is remap and old_scaling == scaling
        if not (same and (freqs is None or torch.equal(old_freqs, freqs))):
            raise ValueError(
                "the cache's tokens were computed under other RoPE frequencies or another remap; "
                "start a new cache (CausalLM.kv_cache)"
            )

    @property
    def length(self) -> int:
        """Tokens cached so far."""
        return self[0].length

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` tokens: those after them are to be replaced."""
        for layer in self:
            layer.truncate(length)


class CausalLM(nn.Module):
    """Decoder-only LM over a byte (or any small) vocabulary.

    Shapes: b batch, s sequence length, d width, V vocabulary.
    """

    takes_patches = False  # it reads tokens (posenc.engine.build matches tasks and schemes to it)
    trains = True  # an option posenc trains (a pretrained checkpoint is only scored)

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
        bias_chunk: int | None = None,
        causal: bool = True,
    ) -> None:
        """``bias_chunk``: queries per attention chunk when the scheme adds a bias; None picks
        the scheme's key-only bias if it has one (ALiBi), else the full bias at short lengths and
        chunks of ``BIAS_BLOCK_ELEMENTS`` at long ones."""
        super().__init__()
        if bias_chunk is not None and bias_chunk < 1:
            raise ConfigError(f"model.bias_chunk must be >= 1 or null, got {bias_chunk}")
        self._bias_chunk, self._causal = bias_chunk, causal
        self.length_scale: NoScale | None = None  # re-applied for each forward's length (follow_length)
        self.remap: Remap | None = None  # a position remap every attention runs (set_remap)
        n_kv_heads = n_kv_heads or n_heads
        if head_dim is None:
            if d_model % n_heads:
                raise ConfigError(f"model.d_model={d_model} is not divisible by model.n_heads={n_heads}")
            head_dim = d_model // n_heads
        if n_heads % n_kv_heads:
            raise ConfigError(f"model.n_heads={n_heads} is not divisible by model.n_kv_heads={n_kv_heads}")
        if pe.ndim != 1:
            raise ConfigError(
                f"pe '{type(pe).__name__}' is a 2D scheme for image patches; the causal LM takes "
                f"a 1D scheme" + (f", e.g. pe={pe.counterpart}" if pe.counterpart else " (posenc list pe)")
            )
        if pe.nope_layers and max(pe.nope_layers) >= n_layers:
            raise ConfigError(
                f"pe.nope_layers={list(pe.nope_layers)} names layers past the model's {n_layers} "
                f"(valid: 0..{n_layers - 1})"
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
        self._select_attention()  # attention_backend: the attention every forward runs

    def _init(self, std: float, n_layers: int) -> None:
        init_weights(self, std, n_layers)

    @property
    def causal(self) -> bool:
        """False: a bidirectional encoder (permutation tests, ``posenc order``)."""
        return self._causal

    @causal.setter
    def causal(self, causal: bool) -> None:
        self._causal = causal
        self._select_attention()

    @property
    def bias_chunk(self) -> int | None:
        return self._bias_chunk

    @bias_chunk.setter
    def bias_chunk(self, chunk: int | None) -> None:
        self._bias_chunk = chunk
        self._select_attention()

    def _select_attention(self) -> None:
        if self.remap is not None:  # set_remap: the remap's attention, whatever the scheme
            self.attention_backend: str = "remap"
            return
        weight = self.embed.weight  # its device and dtype: the model's, after every move or cast
        self.attention_backend = select_attention(self.pe, weight.device, self.causal, self.bias_chunk, weight.dtype)

    def set_remap(self, remap: NoRemap | None) -> None:
        """Run every attention through ``remap`` (``posenc.pe.remap``; None or ``none``: the model's
        own attention, untouched), checked against the scheme and the causal mask first."""
        if remap is not None and remap.active:
            remap.check(self.pe, type(self.pe).__name__)
            if not self.causal:
                raise ConfigError(f"remap '{remap.name}' runs a causal model's attention; this model is bidirectional")
        self.remap = remap if remap is not None and remap.active else None
        self._select_attention()

    def _apply(self, fn, recurse=True):
        """Moved to another device, the model picks the attention that device runs."""
        out = super()._apply(fn, recurse)
        self._select_attention()
        return out

    def follow_length(self, scale: NoScale | None) -> None:
        """Re-apply ``scale`` to the scheme at the start of every forward, for that forward's length
        (a shipped dynamic NTK or LongRoPE, as transformers does on a fresh model; no state is kept
        between passes); None: the scheme stays as it is."""
        self.length_scale = scale

    def kv_cache(self) -> KVCache | None:
        """An empty cache for decoding token by token (``forward(…, cache=)``), or None where the
        scheme needs more than unrotated keys and values to extend a sequence (a bias, an added
        embedding, another rotation than RoPE's), or where the frequencies follow the length
        (``follow_length``: each new token changes them, and with them every earlier token's hidden
        states, which a cache would keep as they were): decode by full forwards."""
        pe = self.pe
        rope = type(pe) is RoPE or not (pe.rotates_qk or pe.adds_bias or pe.adds_embedding)
        if not rope or not self.causal or self.length_scale is not None:
            return None
        return KVCache(LayerCache() for _ in self.blocks)

    def attention_chunk(self, batch: int, seq_len: int) -> int:
        """Queries per attention chunk for a bias scheme; ``seq_len`` means one full bias."""
        if self.bias_chunk is not None:
            return min(self.bias_chunk, seq_len)
        return min(seq_len, max(1, BIAS_BLOCK_ELEMENTS // (batch * self.n_heads * seq_len)))

    def attention_bias(
        self, positions: torch.Tensor, batch: int, dtype: torch.dtype
    ) -> tuple[torch.Tensor | None, int]:
        """The bias every layer shares and the query chunk size: on ``sdpa_key_bias`` a per-key
        (…, n_h, 1, s) bias where it is exact (float32 or wider, non-decreasing positions) and s > b·h_d,
        else a full (…, n_h, s, s) bias at short lengths, else None and chunks built inside attention."""
        s = positions.shape[-1]
        # the key-only form equals the bias under a causal mask (a row constant cancels), exactly so
        # in float32 over positions that never decrease. It widens q, k and v by one dimension (three
        # copies of b·n_h·s·h_d, and their gradients); a full (n_h, s, s) bias is shared by the batch,
        # so while s <= b·h_d (training batches) that one mask costs SDPA less than the copies
        wide = s > batch * self.head_dim
        if self.attention_backend == "sdpa_key_bias" and wide and dtype in (torch.float32, torch.float64):
            if bool((positions.diff(dim=-1) >= 0).all()):
                return self.pe.key_bias(positions)[..., None, :], s  # (…, n_h, 1, s)
        chunk = self.attention_chunk(batch, s)
        return (self.pe.bias(positions, positions) if chunk == s else None), chunk  # (…, n_h, s, s)

    def forward(
        self,
        idx: torch.Tensor,
        positions: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
        chunk: int = 1024,
        last: int | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """(b, s) token ids, optional (s,) or (b, s) positions -> (b, s, V) logits.

        Without explicit positions a model in training mode whose scheme has ``randomized`` set
        sees sorted random positions from [0, ``pe.randomized_max``); otherwise 0..s-1. A
        ``length_scale`` (``follow_length``) is applied first, for the largest position + 1.
        With (b, s) ``targets``: their (b, s) float32 cross-entropy instead (0 where a target is
        ``IGNORE_INDEX``), the head run ``chunk`` positions at a time so that full-vocabulary
        logits never exist for the whole window (a 16k window of a 49k vocabulary: 3 GiB).
        ``last``: the logits of the last ``last`` positions only, (b, last, V). ``cache``
        (``kv_cache``): ``idx`` continues the tokens cached, at positions after them (``positions``
        is not given); its keys and values are added to the cache, and its logits equal those of a
        forward over every token.
        """
        b, s = idx.shape
        pe = self.pe
        if cache is not None:  # idx's tokens after the cached ones; only their queries run
            cache.check(pe, self.remap)
            positions = default_positions(cache.length + s, idx.device)
        if self.length_scale is not None:  # frequencies that follow the length (dynamic NTK, LongRoPE)
            self.length_scale.apply(pe, s if positions is None else int(positions.max()) + 1)
        if positions is None and self.training and pe.randomized:
            positions = randomized_positions(s, pe.randomized_max, device=idx.device)
        elif positions is None:
            positions = default_positions(s, idx.device)
        x = self.embed(idx)  # (b, s, d)
        with float32(idx.device):
            if pe.adds_embedding:
                x = x + pe.embedding(positions).to(x.dtype)  # (b, s, d)
            rotation = None
            if pe.rotates_qk and self.remap is None:  # with a cache: idx's positions (cached keys are rotated)
                rotation = pe.rotation(positions if cache is None else positions[-s:], x.dtype)
            if self.remap is not None:  # the remap's rotations at each of its views' positions, once
                n = positions.shape[-1]
                rotation = self.remap.prepare(pe, positions, x.dtype, remap_chunk(b * self.n_heads, n))
            # the attention's query chunk is its own: ``chunk`` stays the head's (once overwritten here,
            # the head ran over the whole window, full-vocabulary logits for 16k tokens: 9 GB at 12k)
            bias, queries = self.attention_bias(positions, b, x.dtype) if pe.adds_bias else (None, s)
        for i, block in enumerate(self.blocks):
            rotated = None if i in pe.nope_layers else rotation  # a layer without RoPE (pe.nope_layers)
            layer = None if cache is None else cache[i]
            x = block(x, pe, rotated, bias, self.causal, positions, queries, self.attention_backend, layer)
        x = self.norm(x)
        if targets is not None:
            return chunked_cross_entropy(x, self.output_weight, targets, chunk)
        if last is not None:
            x = x[:, -last:]
        return x @ self.output_weight.T  # (b, s, V)

    @property
    def output_weight(self) -> torch.Tensor:
        """(V, d): the head's weight, or the embedding's when tied."""
        return self.embed.weight if self.head is None else self.head.weight

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
