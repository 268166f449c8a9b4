"""Load a Hugging Face ``LlamaForCausalLM`` into a posenc ``CausalLM`` with the same logits.

Llama is the de-facto reference for RoPE models; matching its logits to 1e-5 in float32 checks
that our RoPE (half layout, θ_i = base^(-2i/d)), RMSNorm, SwiGLU and grouped-query attention are
the ones the ecosystem runs, and lets posenc study real checkpoints.
"""

from __future__ import annotations

from typing import Any

import torch

from posenc.core.errors import ConfigError
from posenc.models.lm import CausalLM
from posenc.pe.rope import RoPE
from posenc.pe.rope_scaling import proportional_frequencies
from posenc.pe.scaling import PI, NoScale, hf_scale_classes, scale_parameters


def _rope_parameters(config: Any) -> dict[str, Any]:
    params = getattr(config, "rope_parameters", None)  # transformers >= 5
    if params is None:  # transformers 4.x keeps them apart
        params = dict(getattr(config, "rope_scaling", None) or {})
        params.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    params = dict(params)
    params.setdefault("rope_type", params.get("type", "default"))
    return params


# Gemma's partial rotary over the whole head: a RoPE layout (rope_from_hf_config) scaled as PI
PROPORTIONAL = "proportional"


def scale_from_hf_config(config: Any) -> NoScale:
    """The posenc scale whose class declares the config's ``rope_type`` (``hf_rope_type``), its
    parameters read by their declared names (``NoScale`` for ``default``)."""
    params = _rope_parameters(config)
    kind, max_len = params["rope_type"], config.max_position_embeddings
    classes = hf_scale_classes()
    cls = PI if kind == PROPORTIONAL else classes.get(kind)
    if cls is None:
        raise ConfigError(f"rope_type '{kind}' is not supported; supported: {', '.join([*classes, PROPORTIONAL])}")
    names = scale_parameters(cls)
    if not names:
        return cls()
    lengths = {"max_position_embeddings": max_len,
               "original_max_position_embeddings": params.get("original_max_position_embeddings", max_len)}
    original = lengths[cls.hf_trained_length]
    factor = params.get("factor") or max_len / original  # yarn and longrope infer it when absent
    given = {n: params[n] for n in names if params.get(n) is not None and n not in ("factor", "original_length")}
    return cls(factor=factor, original_length=original, **given)


def rope_from_hf_config(config: Any) -> RoPE:
    """The posenc RoPE a Hugging Face config describes, its rescaling installed.

    Scales whose frequencies depend on the length (dynamic NTK, LongRoPE) are installed for
    ``max_position_embeddings``; ``from_hf_llama`` re-applies them at every forward pass.
    """
    params = _rope_parameters(config)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    fraction = float(params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None) or 1.0))
    scale = scale_from_hf_config(config)
    base = float(params["rope_theta"])
    if params["rope_type"] == PROPORTIONAL:  # zero frequencies past the fraction, over the whole head
        rope = RoPE(head_dim=head_dim, base=base, layout="half")
        rope.set_frequencies(*proportional_frequencies(head_dim, base, fraction, scale.factor))
        return rope
    rope = RoPE(head_dim=head_dim, base=base, layout="half", rotary_fraction=fraction)
    scale.check(rope)
    scale.apply(rope, config.max_position_embeddings)
    return rope


def _follow_length(scale: NoScale):
    """A forward pre-hook re-applying ``scale`` for the length of each forward pass."""

    def hook(module: CausalLM, args: tuple, kwargs: dict) -> None:
        idx = args[0] if args else kwargs["idx"]
        positions = args[1] if len(args) > 1 else kwargs.get("positions")
        length = idx.shape[1] if positions is None else int(positions.max()) + 1
        scale.apply(module.pe, length)

    return hook


def from_hf_llama(model: Any) -> CausalLM:
    """A posenc ``CausalLM`` holding the weights of a Hugging Face ``LlamaForCausalLM``.

    Every ``rope_type`` of ``rope_parameters`` is supported (default, linear, dynamic, yarn, llama3,
    longrope, proportional). Dynamic NTK and LongRoPE follow the length of each forward pass, as
    transformers does on a fresh model; unlike it, they never keep a longer length's frequencies
    for a later, shorter pass (no state between passes).
    """
    config = model.config
    if getattr(config, "hidden_act", "silu") != "silu":
        raise ConfigError(f"hidden_act '{config.hidden_act}' is not supported; Llama uses silu")
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    lm = CausalLM(
        pe=rope_from_hf_config(config),
        vocab_size=config.vocab_size,
        d_model=config.hidden_size,
        n_layers=config.num_hidden_layers,
        n_heads=config.num_attention_heads,
        n_kv_heads=config.num_key_value_heads,
        head_dim=head_dim,
        mlp_hidden=config.intermediate_size,
        norm_eps=config.rms_norm_eps,
        tie_embeddings=bool(config.tie_word_embeddings),
        attention_bias=bool(getattr(config, "attention_bias", False)),
        mlp_bias=bool(getattr(config, "mlp_bias", False)),
    )
    src = model.state_dict()
    names = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    if lm.head is not None:
        names["head.weight"] = "lm_head.weight"
    parts = {"attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm",
             "attn.q": "self_attn.q_proj", "attn.k": "self_attn.k_proj", "attn.v": "self_attn.v_proj",
             "attn.o": "self_attn.o_proj", "mlp.gate": "mlp.gate_proj", "mlp.up": "mlp.up_proj",
             "mlp.down": "mlp.down_proj"}
    for name in lm.state_dict():
        if name.startswith("blocks."):
            _, i, rest = name.split(".", 2)
            module, _, leaf = rest.rpartition(".")
            names[name] = f"model.layers.{i}.{parts[module]}.{leaf}"
    with torch.no_grad():
        lm.load_state_dict({ours: src[theirs] for ours, theirs in names.items()}, strict=True)
    scale = scale_from_hf_config(config)
    if scale.length_dependent:
        lm.register_forward_pre_hook(_follow_length(scale), with_kwargs=True)
    return lm.to(next(model.parameters()).dtype)
