"""Every RoPE family transformers runs, as a language model posenc scores.

Llama (and SmolLM/SmolLM2, which ship as llama) maps into posenc's own ``CausalLM``
(``from_hf_llama``). Every other family runs transformers' own decoder modules, its norms,
biases, q/k norms, sliding windows, soft-capping, fused projections and residual layout exactly as
transformers runs them, with one part replaced: the rotary-embedding module, whose cos and sin now
come from posenc RoPE schemes (``InjectedRotary``), one per layer type where the config gives each
type its own (Gemma 3's local θ = 10⁴ and global θ = 10⁶). A scaling acts on one of them, the
family's ``scaled_layer_type`` unless another is asked for, so posenc's scales, positions and
length-following rescalings (dynamic NTK, LongRoPE's switch at the original context) apply to every
family in one place. Attention is posenc's too (``banded_attention``, through transformers'
``AttentionInterface``): fused causal SDPA, or blocks of queries against the keys they see for a
sliding window or soft-capped scores, never an (s, s) mask. A position remap (``posenc.pe.remap``)
runs there too: its layers get cos 1 and sin 0 from the injected rotary, and ``banded_attention``
rotates q and k per view (``InjectedLM.set_remap``). The head and the loss are posenc's:
full-vocabulary logits exist for ``chunk`` positions at a time only (``chunked_cross_entropy``),
soft-capped as the family does.

Each family's logits and token losses equal transformers' under every scaling it takes (float32,
tests/models/test_families.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from posenc.core.errors import ConfigError
from posenc.models.blocked import blocked_causal_attention, runs_blocked
from posenc.models.blocks import LayerCache, cached_attention
from posenc.models.hf import (
    GLOBAL_LAYERS,
    from_hf_llama,
    rope_from_hf_config,
    rope_layer_types,
    rope_parameters,
    scale_from_hf_config,
)
from posenc.models.lm import KVCache, chunked_cross_entropy
from posenc.pe.base import default_positions, float32
from posenc.pe.remap.base import NoRemap, RemapState, remap_chunk
from posenc.pe.rope import RoPE
from posenc.pe.scaling import NoScale


@dataclass(frozen=True)
class Family:
    """What posenc knows of one Hugging Face ``model_type``.

    ``label``: how the family reads in the supported list. ``native``: mapped into posenc's own
    ``CausalLM`` (else transformers' modules with posenc's RoPE injected). ``scaled_layer_type``:
    where the config gives each layer type its own RoPE, the type a rescaling acts on by default
    (the one the family itself scales).
    """

    model_type: str
    label: str
    native: bool = False
    scaled_layer_type: str | None = None

    def convert(self, model: Any, scaled_layer_type: str | None = None) -> nn.Module:
        """The posenc model holding ``model``'s weights (its own tensors, not copies)."""
        if self.native:
            scaled_layer_type_of(model.config, scaled_layer_type)  # one RoPE: nothing may be asked
            return from_hf_llama(model)
        return InjectedLM(model, scaled_layer_type or self.scaled_layer_type)


FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in (
        Family("llama", "Llama (SmolLM, SmolLM2)", native=True),
        Family("mistral", "Mistral (sliding window)"),
        Family("qwen2", "Qwen2/2.5 (q/k/v biases)"),
        Family("qwen3", "Qwen3 (q/k RMSNorm)"),
        Family("phi3", "Phi-3 (fused projections, LongRoPE)"),
        Family("gemma2", "Gemma 2 (sliding/global, soft-capping)"),
        Family("gemma3_text", "Gemma 3 (local and global RoPE)", scaled_layer_type="full_attention"),
        Family("olmo2", "OLMo 2"),
        Family("gpt_neox", "GPT-NeoX, Pythia (partial rotary)"),
        Family("smollm3", "SmolLM3 (layers without RoPE)"),
    )
}


def supported() -> str:
    """The supported families for an error line: "llama (Llama …), mistral (…), …"."""
    return ", ".join(f"{f.model_type} ({f.label})" for f in FAMILIES.values())


def family_of(config: Any) -> Family:
    """The family of a Hugging Face config; ConfigError naming its model type and the supported ones."""
    kind = getattr(config, "model_type", None)
    if kind not in FAMILIES:
        raise ConfigError(f"model_type '{kind}' is not supported; supported: {supported()}")
    return FAMILIES[kind]


def describe_rope(config: Any) -> str:
    """The model's own RoPE for a table title: "θ = …, rope_type …", per layer type where each has its own."""

    def one(params: dict[str, Any]) -> str:
        return f"θ = {params['rope_theta']:g}, rope_type {params['rope_type']}"

    types = rope_layer_types(config)
    if not types:
        return one(rope_parameters(config))
    return "; ".join(f"{t}: {one(rope_parameters(config, t))}" for t in types)


def scaled_layer_type_of(config: Any, asked: str | None = None) -> str | None:
    """The layer type a scaling acts on: ``asked``, else the global layers where the config gives
    each layer type its own RoPE; None where every layer shares one. A type the model has not (or
    any type asked of a model with one RoPE) is a ConfigError naming the valid ones, checked from
    the config alone, before any weight is read."""
    types = rope_layer_types(config)
    if not types:
        if asked is not None:
            raise ConfigError(f"'{config.model_type}' has one RoPE for every layer; no layer type '{asked}' to scale")
        return None
    chosen = asked or (GLOBAL_LAYERS if GLOBAL_LAYERS in types else types[0])
    if chosen not in types:
        raise ConfigError(f"'{config.model_type}' has no layer type '{chosen}' to scale; valid: {', '.join(types)}")
    return chosen


def remap_refusal(config: Any, scaled_layer_type: str | None) -> str | None:
    """Why a position remap cannot run on this model's remapped layers (those of ``scaled_layer_type``,
    or every layer where they share one RoPE), read from the config alone; None when it can. Its
    attention is plain causal attention: soft-capped scores (Gemma 2) and sliding windows (Mistral,
    Qwen2's window layers; Gemma 3's local layers are not remapped) are not."""
    if getattr(config, "attn_logit_softcapping", None):
        return "its attention scores are soft-capped"
    if getattr(config, "sliding_window", None):
        types = getattr(config, "layer_types", None)
        if scaled_layer_type == "sliding_attention" or (
            scaled_layer_type is None and (types is None or "sliding_attention" in types)
        ):
            return "its remapped layers attend within a sliding window"
    return None


# transformers' name for posenc's attention (``banded_attention``), registered with its AttentionInterface
BANDED = "posenc_banded"
BAND_CHUNK = 1024  # queries per block of a sliding-window or soft-capped layer


def banded_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal attention as transformers' attention functions take it, without an (s, s) mask.

    (b, n_h, m, h_d) query, (b, n_kv, m, h_d) key and value -> ((b, m, n_h, h_d), None). A layer
    with neither a sliding window nor soft-capping is one fused causal SDPA (O(s) memory). A sliding
    window (query i sees keys i − w < j ≤ i, as transformers' ``sliding_window_overlay``) or Gemma 2's
    score soft-capping c·tanh(score / c) runs ``BAND_CHUNK`` queries at a time against the keys they
    can see: peak memory one (b, n_h, chunk, chunk + w) block, where transformers builds a full
    (s, s) mask (4 GiB at 64k tokens) and, with soft-capping, eager (b, n_h, s, s) scores.
    ``attention_mask`` is None: transformers builds no mask for an attention it has no mask
    function for, and posenc's windows have no padding. With a decoding cache on the module
    (``module.posenc_cache``, ``InjectedLM.forward(…, cache=)``) the m tokens extend the cached
    ones and are the last m of the t queries so far: they see the cached keys too.
    """
    b, n_h, m, h_d = query.shape
    scale = scaling if scaling is not None else h_d**-0.5
    cache: LayerCache | None = getattr(module, "posenc_cache", None)  # InjectedLM.forward's, this step's
    if cache is not None:  # keys as transformers hands them (rotated, or unrotated in a remapped layer)
        key, value = cache.extend(key, value)  # (b, n_kv, t, h_d)
    offset = key.shape[2] - m  # the tokens before these queries (0 without a cache)
    state: RemapState | None = getattr(module, "posenc_remap", None)  # InjectedLM.set_remap's, this forward's
    if state is not None:  # a position remap: its layers' q and k come unrotated, it rotates them per view
        return state.attend(query, key, value, scale).transpose(1, 2).contiguous(), None
    if offset:  # a decoding step: a few queries against the cached keys (only the window's read)
        out = cached_attention(query, key, value, scale=scale, window=sliding_window, softcap=softcap)
        return out.transpose(1, 2).contiguous(), None
    plain = not sliding_window and not softcap
    if plain and runs_blocked(query):  # bfloat16 on the CPU: 2x SDPA's kernel
        return blocked_causal_attention(query, key, value, scale).transpose(1, 2), None
    if key.shape[1] != n_h:
        key = key.repeat_interleave(n_h // key.shape[1], dim=1)  # (b, n_h, t, h_d)
        value = value.repeat_interleave(n_h // value.shape[1], dim=1)  # (b, n_h, t, h_d)
    if plain:
        out = F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scale)
        return out.transpose(1, 2).contiguous(), None
    blocks = []
    for start in range(0, m, BAND_CHUNK):
        stop = min(start + BAND_CHUNK, m)
        first = max(0, start - sliding_window + 1) if sliding_window else 0  # the first key any query sees
        i = torch.arange(start, stop, device=query.device)[:, None]
        j = torch.arange(first, stop, device=query.device)[None, :]
        seen = (j <= i) & ((i - j < sliding_window) if sliding_window else True)  # (c, e)
        q, k, v = query[:, :, start:stop], key[:, :, first:stop], value[:, :, first:stop]
        if softcap:
            scores = torch.tanh(q @ k.transpose(-1, -2) * (scale / softcap)) * softcap  # (b, n_h, c, e)
            weights = scores.masked_fill(~seen, float("-inf")).softmax(-1, dtype=torch.float32).to(q.dtype)
            blocks.append(weights @ v)  # (b, n_h, c, h_d)
        else:
            blocks.append(F.scaled_dot_product_attention(q, k, v, attn_mask=seen, scale=scale))
    return torch.cat(blocks, dim=2).transpose(1, 2).contiguous(), None


class InjectedRotary(nn.Module):
    """Stands in for a transformers model's ``rotary_emb``: cos and sin of posenc RoPE schemes.

    ``forward(x, position_ids, layer_type=None)`` has the signature transformers calls (Gemma 3
    passes the layer type) and returns its layout: (b, s, r) cos and sin, each r/2 angles written
    twice (``rotate_half``'s pairs i and i + r/2), times the scheme's attention scaling, computed in
    float32 and cast to ``x``'s dtype, as transformers does.
    """

    def __init__(self, ropes: dict[str, RoPE], default: str) -> None:
        super().__init__()
        self.ropes = nn.ModuleDict(ropes)
        self.default = default
        self.unrotated: set[str] = set()  # layer types a position remap rotates itself (cos 1, sin 0 here)

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rope = self.ropes[layer_type or self.default]
        if (layer_type or self.default) in self.unrotated:
            shape = (*position_ids.shape, rope.rot_dim)  # (b, s, r)
            return torch.ones(shape, dtype=x.dtype, device=x.device), torch.zeros(shape, dtype=x.dtype, device=x.device)
        with float32(x.device):
            cos, sin = rope.rotation(position_ids, torch.float32)  # (b, s, r/2)
        return torch.cat((cos, cos), -1).to(x.dtype), torch.cat((sin, sin), -1).to(x.dtype)  # (b, s, r)


class InjectedLM(nn.Module):
    """A transformers causal LM run with posenc's RoPE (``InjectedRotary``) and posenc's head.

    It answers what experiments ask of a posenc ``CausalLM``: ``pe`` (the scheme a scaling acts on),
    ``follow_length``, ``embed``, ``output_weight`` and ``forward(idx, positions, targets, chunk,
    last)``. Shapes: b batch, s sequence length, d width, V vocabulary.
    """

    takes_patches = False
    trains = False

    def __init__(self, model: Any, scaled_layer_type: str | None = None) -> None:
        super().__init__()
        config = model.config
        scaled_layer_type = scaled_layer_type_of(config, scaled_layer_type)
        keys = rope_layer_types(config) or (None,)
        ropes = {key or "all": rope_from_hf_config(config, key) for key in keys}
        self.scaled_layer_type = scaled_layer_type
        self.model = model
        base = model.base_model
        if not hasattr(base, "rotary_emb"):
            raise ConfigError(f"'{config.model_type}': transformers' model has no rotary_emb to replace")
        base.rotary_emb = InjectedRotary(ropes, scaled_layer_type or "all")
        from transformers import AttentionInterface

        AttentionInterface.register(BANDED, banded_attention)
        model.set_attn_implementation(BANDED)
        self.softcap: float | None = getattr(config, "final_logit_softcapping", None)
        shipped = scale_from_hf_config(config, scaled_layer_type)
        self.length_scale: NoScale | None = shipped if shipped.length_dependent else None
        self.remap: NoRemap | None = None  # a position remap on the scaled layers (set_remap)
        # every layer's attention module (not registered again as a submodule), and those a remap runs in
        self._attentions = [next(m for m in layer.children() if hasattr(m, "scaling")) for layer in base.layers]
        self._remapped: list[nn.Module] = []

    @property
    def ropes(self) -> nn.ModuleDict:
        """Every layer type's RoPE (key ``all`` when the layers share one)."""
        return self.model.base_model.rotary_emb.ropes

    @property
    def pe(self) -> RoPE:
        """The RoPE a scaling acts on: the ``scaled_layer_type``'s, or the one every layer shares."""
        return self.ropes[self.scaled_layer_type or "all"]

    @property
    def embed(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    @property
    def output_weight(self) -> torch.Tensor:
        """(V, d): the head's weight (the embedding's when tied)."""
        return self.model.get_output_embeddings().weight

    def follow_length(self, scale: NoScale | None) -> None:
        """As ``CausalLM.follow_length``: ``scale`` re-applied to ``pe`` for each forward's length."""
        self.length_scale = scale

    def kv_cache(self) -> KVCache | None:
        """An empty cache for decoding token by token (``forward(…, cache=)``), as
        ``CausalLM.kv_cache``: every layer's keys and values as its attention receives them (rotated
        at their own positions, or unrotated in the layers a remap rotates per view), kept by
        ``banded_attention``, not by transformers. None where the frequencies follow the length
        (``follow_length``): decode by full forwards."""
        if self.length_scale is not None:
            return None
        return KVCache(LayerCache() for _ in self._attentions)

    def set_remap(self, remap: NoRemap | None) -> None:
        """Run ``remap`` (``posenc.pe.remap``; None or ``none``: off) in the attention of every layer
        with RoPE of the scaled layer type (all of them where the layers share one RoPE): transformers
        gets cos 1 and sin 0 for those layers, and ``banded_attention`` rotates q and k per view. A model
        whose remapped layers have a sliding window or soft-capped scores is refused (``remap_refusal``)."""
        config = self.model.config
        active = remap is not None and remap.active
        if active:
            remap.check(self.pe, type(self.pe).__name__)
            why = remap_refusal(config, self.scaled_layer_type)
            if why:
                raise ConfigError(f"remap '{remap.name}' cannot run on '{config.model_type}': {why}")
        key = self.scaled_layer_type or "all"
        types = getattr(config, "layer_types", None) if self.scaled_layer_type else None
        self._remapped = [
            attn
            for i, attn in enumerate(self._attentions)
            if active and (types is None or types[i] == key) and getattr(attn, "use_rope", True)
        ]
        self.model.base_model.rotary_emb.unrotated = {key} if active else set()
        self.remap = remap if active else None

    def forward(
        self,
        idx: torch.Tensor,
        positions: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
        chunk: int = 1024,
        last: int | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """(b, s) token ids, optional (s,) or (b, s) positions -> (b, s, V) logits; with (b, s)
        ``targets`` their (b, s) float32 losses, the head run ``chunk`` positions at a time;
        ``last``: the logits of the last ``last`` positions only. ``cache`` (``kv_cache``): as
        ``CausalLM.forward``, ``idx`` continues the tokens cached, at the positions after them."""
        b, s = idx.shape
        if cache is not None:  # idx's tokens after the cached ones; only their queries run
            cache.check(self.pe, self.remap)
            positions = default_positions(cache.length + s, idx.device)
        if positions is None:
            positions = default_positions(s, idx.device)
        if self.length_scale is not None:  # frequencies that follow the length (dynamic NTK, LongRoPE)
            self.length_scale.apply(self.pe, int(positions.max()) + 1)
        if self.remap is not None:  # the remap's rotations, once, for the layers it runs in (every token's)
            with float32(idx.device):
                heads = self.model.config.num_attention_heads
                n = positions.shape[-1]
                state = self.remap.prepare(self.pe, positions, self.embed.weight.dtype, remap_chunk(b * heads, n))
            for attn in self._remapped:
                attn.posenc_remap = state
        positions = positions[..., -s:]  # idx's own
        positions = positions.expand(b, s) if positions.dim() == 1 else positions  # (b, s)
        for attn, layer in zip(self._attentions, cache if cache is not None else [None] * len(self._attentions)):
            attn.posenc_cache = layer
        try:
            x = self.model.base_model(
                input_ids=idx, position_ids=positions, use_cache=False
            ).last_hidden_state  # (b, s, d)
        finally:
            for attn in self._attentions:
                attn.posenc_remap = attn.posenc_cache = None
        if targets is not None:
            return chunked_cross_entropy(x, self.output_weight, targets, chunk, self.softcap)
        if last is not None:
            x = x[:, -last:]
        logits = x @ self.output_weight.T  # (b, s, V)
        return logits if not self.softcap else torch.tanh(logits / self.softcap) * self.softcap

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
