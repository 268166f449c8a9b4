"""Load a Hugging Face ``LlamaForCausalLM`` into a posenc ``CausalLM`` with the same logits.

Llama is the de-facto reference for RoPE models; matching its logits to 1e-5 in float32 checks
that our RoPE (half layout, θ_i = base^(-2i/d)), RMSNorm, SwiGLU and grouped-query attention are
the ones the ecosystem runs, and lets posenc study real checkpoints.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from posenc.core.errors import ConfigError
from posenc.models.lm import CausalLM
from posenc.pe.rope import RoPE
from posenc.pe.scaling import NoScale, hf_scale_classes, scale_parameters

# The layer type whose RoPE a config with one RoPE per layer type (Gemma 3) describes when no type is
# named: the global layers, the ones that carry its shipped rescaling
GLOBAL_LAYERS = "full_attention"


def rope_layer_types(config: Any) -> tuple[str, ...]:
    """The layer types a config gives RoPE settings of their own (Gemma 3: ``sliding_attention``
    and ``full_attention``); () when every layer shares one RoPE. Only the entries that are
    dicts count: transformers 5.9 also writes a top-level ``rope_type`` and ``rope_theta: None``
    beside Gemma 3's per-type dicts (and its model reads the per-type ones)."""
    params = getattr(config, "rope_parameters", None)
    if not isinstance(params, dict):
        return ()
    return tuple(key for key, value in params.items() if isinstance(value, dict))


def rope_parameters(config: Any, layer_type: str | None = None) -> dict[str, Any]:
    """A Hugging Face config's RoPE settings in transformers 5's form (``rope_parameters``: θ,
    ``rope_type`` and the scaling's parameters), from transformers 4's ``rope_scaling`` and
    ``rope_theta`` too; a copy, never the config's own dict. A config with one RoPE per layer type
    gives ``layer_type``'s (default ``GLOBAL_LAYERS``)."""
    params = getattr(config, "rope_parameters", None)  # transformers >= 5
    if params is None:  # transformers 4.x keeps them apart
        params = dict(getattr(config, "rope_scaling", None) or {})
        params.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    types = rope_layer_types(config)
    if types:
        layer_type = layer_type or (GLOBAL_LAYERS if GLOBAL_LAYERS in types else types[0])
        if layer_type not in types:
            raise ConfigError(
                f"layer type '{layer_type}' has no RoPE of its own in this '{config.model_type}' model; "
                f"valid: {', '.join(types)}"
            )
        params = params[layer_type]
    params = dict(params)
    params.setdefault("rope_type", params.get("type", "default"))
    return params


def scale_from_hf_config(config: Any, layer_type: str | None = None) -> NoScale:
    """The posenc scale whose class declares the config's ``rope_type`` (``hf_rope_type``), its
    parameters read by their declared names (``NoScale`` for ``default``); ``layer_type``: as in
    ``rope_parameters``."""
    params = rope_parameters(config, layer_type)
    kind, max_len = params["rope_type"], config.max_position_embeddings
    classes = hf_scale_classes()
    cls = classes.get(kind)
    if cls is None:
        raise ConfigError(f"rope_type '{kind}' is not supported; supported: {', '.join(classes)}")
    names = scale_parameters(cls)
    if not names:
        return cls()
    lengths = {
        "max_position_embeddings": max_len,
        "original_max_position_embeddings": params.get("original_max_position_embeddings", max_len),
    }
    original = lengths[cls.hf_trained_length]
    factor = params.get("factor") or max_len / original  # yarn and longrope infer it when absent
    given = {n: params[n] for n in names if params.get(n) is not None and n not in ("factor", "original_length")}
    return cls(factor=factor, original_length=original, **given)


def rope_from_hf_config(config: Any, layer_type: str | None = None) -> RoPE:
    """The posenc RoPE a Hugging Face config describes (for ``layer_type``, as in
    ``rope_parameters``), its rescaling installed.

    Scales whose frequencies depend on the length (dynamic NTK, LongRoPE) are installed for
    ``max_position_embeddings``; ``from_hf_llama`` has the LM re-apply them at every forward pass
    (``CausalLM.follow_length``).
    """
    params = rope_parameters(config, layer_type)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    fraction = float(params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None) or 1.0))
    scale = scale_from_hf_config(config, layer_type)
    if scale.whole_head:  # p-RoPE takes the fraction itself, over the whole head
        fraction = 1.0
    rope = RoPE(head_dim=head_dim, base=float(params["rope_theta"]), layout="half", rotary_fraction=fraction)
    scale.check(rope)
    scale.apply(rope, config.max_position_embeddings)
    return rope


# posenc block module -> Llama decoder-layer module
LLAMA_PARTS = {
    "attn_norm": "input_layernorm",
    "mlp_norm": "post_attention_layernorm",
    "attn.q": "self_attn.q_proj",
    "attn.k": "self_attn.k_proj",
    "attn.v": "self_attn.v_proj",
    "attn.o": "self_attn.o_proj",
    "mlp.gate": "mlp.gate_proj",
    "mlp.up": "mlp.up_proj",
    "mlp.down": "mlp.down_proj",
}


def llama_names(lm: CausalLM) -> dict[str, str]:
    """posenc state-dict name -> Hugging Face ``LlamaForCausalLM`` name, for every tensor of
    ``lm`` (``lm_head.weight`` only when the head is untied). Loading and saving both read it."""
    names = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    if lm.head is not None:
        names["head.weight"] = "lm_head.weight"
    for name in lm.state_dict():
        if name.startswith("blocks."):
            _, i, rest = name.split(".", 2)
            module, _, leaf = rest.rpartition(".")
            names[name] = f"model.layers.{i}.{LLAMA_PARTS[module]}.{leaf}"
    return names


def to_hf_llama_state(lm: CausalLM) -> dict[str, torch.Tensor]:
    """``lm``'s tensors under their ``LlamaForCausalLM`` names, contiguous (safetensors wants it)."""
    state = lm.state_dict()
    return {theirs: state[ours].detach().contiguous() for ours, theirs in llama_names(lm).items()}


def from_hf_llama(model: Any) -> CausalLM:
    """A posenc ``CausalLM`` holding the weights of a Hugging Face ``LlamaForCausalLM``: the
    model's own tensors, not copies (built on the meta device, then assigned), so converting
    costs no second set of weights; clone them to train one without changing the other.

    Every ``rope_type`` of ``rope_parameters`` is supported (default, linear, dynamic, yarn, llama3,
    longrope, proportional). Dynamic NTK and LongRoPE follow the length of each forward pass, as
    transformers does on a fresh model; unlike it, they never keep a longer length's frequencies
    for a later, shorter pass (no state between passes).
    """
    config = model.config
    if getattr(config, "hidden_act", "silu") != "silu":
        raise ConfigError(f"hidden_act '{config.hidden_act}' is not supported; Llama uses silu")
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    pe = rope_from_hf_config(config)  # its float32 frequencies are computed, not loaded
    with torch.device("meta"):
        lm = CausalLM(
            pe=pe,
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
    lm.load_state_dict({ours: src[theirs] for ours, theirs in llama_names(lm).items()}, strict=True, assign=True)
    scale = scale_from_hf_config(config)
    if scale.length_dependent:
        lm.follow_length(scale)
    return lm.to(device=next(model.parameters()).device)


def llama_config_for(config: Any, scale: NoScale, rot_dim: int, length: int, layer_type: str | None = None) -> Any:
    """A copy of a model's Hugging Face ``config`` whose RoPE settings give ``scale``'s frequencies,
    for a checkpoint fine-tuned at ``length`` tokens (``scale_from_hf_config`` reads them back to the
    same scale). The scale writes itself (``hf_rope_parameters``): none leaves the config as it is,
    PI on a shipped linear scaling is one linear factor (the product), any other scale on a shipped
    rescaling raises ConfigError, and static NTK, which has no ``rope_type``, is the default RoPE
    with a larger θ. Any family's config, not only Llama's: where each layer type has its own RoPE
    (Gemma 3), the scale is written into ``layer_type``'s (default ``GLOBAL_LAYERS``), the others
    kept as they are."""
    out = copy.deepcopy(config)
    described = scale.hf_rope_parameters(rope_parameters(config, layer_type), rot_dim, length)
    if described is None:
        return out
    new, max_pos = described
    types = rope_layer_types(config)
    if types:  # one RoPE per layer type: only the scaled type's changes
        chosen = layer_type or (GLOBAL_LAYERS if GLOBAL_LAYERS in types else types[0])
        out.rope_parameters = {**copy.deepcopy(config.rope_parameters), chosen: new}
    elif hasattr(out, "rope_parameters"):  # transformers >= 5
        out.rope_parameters = new
    else:
        out.rope_theta = new.pop("rope_theta")
        out.rope_scaling = None if new["rope_type"] == "default" else new
    out.max_position_embeddings = max_pos
    return out


def save_hf_llama(lm: CausalLM, config: Any, tokenizer: Any, folder: Path) -> Path:
    """``lm`` as a Hugging Face checkpoint folder that ``AutoModelForCausalLM`` loads: its tensors
    (``to_hf_llama_state``) in model.safetensors, ``config`` (``llama_config_for``) in config.json
    (``write_checkpoint``)."""
    from safetensors.torch import save_file

    if lm.pe.nope_layers:
        raise ConfigError(
            f"a Llama checkpoint rotates every layer; this model has none in layers {list(lm.pe.nope_layers)}"
        )
    config = copy.deepcopy(config)
    config.architectures = ["LlamaForCausalLM"]
    config.tie_word_embeddings = lm.head is None
    config.dtype = lm.embed.weight.dtype

    def weights(partial: Path) -> None:
        save_file(to_hf_llama_state(lm), partial / "model.safetensors", metadata={"format": "pt"})

    return write_checkpoint(weights, config, tokenizer, folder)


def save_hf_model(model: Any, config: Any, tokenizer: Any, folder: Path) -> Path:
    """A transformers model of any family saved with another ``config`` (``llama_config_for``):
    its weights as they are, a tied head once (under the embedding's name, as transformers
    saves it), in model.safetensors, as ``write_checkpoint`` writes. A model read from a GGUF
    file saves too (transformers' own ``save_pretrained`` refuses one: "quantized with gguf")."""
    from safetensors.torch import save_file

    config = copy.deepcopy(config)
    config.dtype = next(model.parameters()).dtype
    state, seen = {}, set()
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() not in seen:  # the first name of a shared tensor: the embedding before the head
            seen.add(tensor.data_ptr())
            state[name] = tensor.detach().contiguous()

    def weights(partial: Path) -> None:
        save_file(state, partial / "model.safetensors", metadata={"format": "pt"})

    return write_checkpoint(weights, config, tokenizer, folder)


def write_checkpoint(weights: Callable[[Path], None], config: Any, tokenizer: Any, folder: Path) -> Path:
    """A Hugging Face checkpoint folder: ``weights(partial)`` writes the tensors, ``config`` goes to
    config.json (``legacy_rope_keys``), then the tokenizer files. Written beside ``folder``, then
    renamed into place."""
    folder = Path(folder)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    weights(partial)
    config.save_pretrained(partial)
    legacy_rope_keys(config, partial / "config.json")
    tokenizer.save_pretrained(partial)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def legacy_rope_keys(config: Any, path: Path) -> None:
    """Add transformers 4's ``rope_theta`` and ``rope_scaling`` to the config.json at ``path``,
    where every layer shares one RoPE and transformers reads the file back to the same
    ``rope_parameters``. Not every family kept those names (GPT-NeoX's θ was ``rotary_emb_base``:
    given ``rope_scaling``, transformers 5 rebuilds its RoPE from the old keys, θ 10,000 whatever
    ``rope_parameters`` says), so a file it reads otherwise stays without them."""
    if rope_layer_types(config):
        return
    plain = path.read_text()
    params = rope_parameters(config)
    data = json.loads(plain)
    data["rope_theta"] = params["rope_theta"]
    data["rope_scaling"] = (
        None if params["rope_type"] == "default" else {k: v for k, v in params.items() if k != "rope_theta"}
    )
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    if rope_parameters(type(config).from_pretrained(path.parent)) != rope_parameters(config):
        path.write_text(plain)
