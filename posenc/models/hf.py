"""Load a Hugging Face ``LlamaForCausalLM`` into a posenc ``CausalLM`` with the same logits.

Llama is the de-facto reference for RoPE models; matching its logits to 1e-5 in float32 checks
that our RoPE (half layout, θ_i = base^(-2i/d)), RMSNorm, SwiGLU and grouped-query attention are
the ones the ecosystem runs, and lets posenc study real checkpoints.
"""

from __future__ import annotations

from typing import Any

import torch

from posenc.errors import ConfigError
from posenc.models.lm import CausalLM
from posenc.pe.rope import RoPE


def _rope_parameters(config: Any) -> dict[str, Any]:
    params = getattr(config, "rope_parameters", None)  # transformers >= 5
    if params is None:  # transformers 4.x keeps them apart
        params = dict(getattr(config, "rope_scaling", None) or {})
        params.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    params = dict(params)
    params.setdefault("rope_type", params.get("type", "default"))
    return params


def rope_from_hf_config(config: Any) -> RoPE:
    """The posenc RoPE a Hugging Face config describes (default rope_type)."""
    params = _rope_parameters(config)
    if params["rope_type"] != "default":
        raise ConfigError(f"rope_type '{params['rope_type']}' is not supported yet; supported: default")
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    fraction = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
    return RoPE(head_dim=head_dim, base=float(params["rope_theta"]), layout="half", rotary_fraction=float(fraction))


def from_hf_llama(model: Any) -> CausalLM:
    """A posenc ``CausalLM`` holding the weights of a Hugging Face ``LlamaForCausalLM``."""
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
    return lm.to(next(model.parameters()).dtype)
