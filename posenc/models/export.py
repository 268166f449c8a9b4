"""A scaled real model as a Hugging Face folder, and the llama.cpp flags that give it the same RoPE.

``posenc export`` writes any model posenc loads (a folder, a GGUF file, a hub id, a fine-tuned copy
posenc saved) with a scaling chosen zero-shot: the weights as they are, config.json carrying the
scaling in transformers' own terms (``llama_config_for``: ``rope_parameters``; ``legacy_rope_keys``
adds transformers 4's ``rope_scaling``/``rope_theta`` where transformers reads them back the same), so that
``AutoModelForCausalLM.from_pretrained(folder)`` computes the logits posenc computes with the scale
installed (tests/models/test_export.py). A fine-tuned copy already carries its scaling: exported with
``none`` it is copied as it is.

llama.cpp's flags for the same RoPE (``llama_cpp_flags``) are data. Their names and meaning are read
from llama.cpp itself (ggml-org/llama.cpp ``common/arg.cpp``, ``src/llama-context.cpp``,
``src/llama-model.cpp``): ``--rope-scaling {none,linear,yarn}``, ``--rope-scale N`` (frequencies / N),
``--rope-freq-base``, ``--yarn-orig-ctx``, ``--yarn-beta-fast``, ``--yarn-beta-slow``, ``--ctx-size``.
YaRN's attention factor is llama.cpp's own 0.1·ln s + 1 whatever ``--yarn-attn-factor`` says (the
context overwrites it while YaRN is on), and the flags act on the layers without a sliding window
only where the family's llama.cpp graph keeps the GGUF's RoPE on the others
(``get_rope_freq_base``/``get_rope_freq_scale``). What the flags cannot say (dynamic NTK, Llama 3's
and LongRoPE's per-frequency factors, p-RoPE, another attention factor, fractional YaRN ramp ends)
is a reason, not a guess: the Hugging Face folder is still written.

What transformers cannot express, a folder in the way, a scale on top of a shipped rescaling or a
layer type the model has not: ``plan_export`` raises ``ConfigError`` before any weight is read and
nothing is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from posenc.core.errors import ConfigError
from posenc.models.families import scaled_layer_type_of
from posenc.models.hf import (
    GLOBAL_LAYERS,
    llama_config_for,
    rope_from_hf_config,
    rope_layer_types,
    rope_parameters,
    save_hf_model,
    scale_from_hf_config,
)
from posenc.models.pretrained import Source, load_transformers, quiet_loading
from posenc.pe.scaling import NoScale

# llama.cpp's graphs of these families give their sliding-window layers the GGUF's own RoPE
# (hparams.is_swa(il) ? rope_freq_*_train_swa : cparams), so the --rope-* flags reach the other layers only
LLAMA_CPP_SLIDING_KEEPS_ROPE = ("gemma2", "gemma3_text")


@dataclass(frozen=True)
class LlamaCpp:
    """llama.cpp's command-line flags for a RoPE: ``flags`` (empty: the model's own RoPE, nothing to
    give), or ``reason`` why llama.cpp's flags cannot express it."""

    flags: tuple[str, ...] = ()
    reason: str | None = None

    def line(self) -> str:
        """The flags as one line to paste, "none needed …", or "not expressible: why"."""
        if self.reason:
            return f"not expressible: {self.reason}"
        return " ".join(self.flags) if self.flags else "none needed (the model's own RoPE)"


def _number(x: float) -> str:
    return f"{float(x):.10g}"


def _yarn_mscale(factor: float) -> float:
    """YaRN's attention factor 0.1·ln s + 1 (1 for s ≤ 1), as llama.cpp computes it."""
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def llama_cpp_flags(config: Any, scaled: Any, length: int, layer_type: str | None = None) -> LlamaCpp:
    """The llama.cpp flags that give the RoPE of ``scaled`` (an exported config) to the model of
    ``config`` (its own), run at ``length`` tokens: the scaling of ``scaled``'s rope_parameters
    (``layer_type``'s where each type has its own), θ only where it differs from the model's own."""
    base, params = rope_parameters(config, layer_type), rope_parameters(scaled, layer_type)
    kind = params["rope_type"]
    if kind == "default" and params["rope_theta"] == base["rope_theta"]:
        return LlamaCpp()
    types = rope_layer_types(config)
    if types and (layer_type or GLOBAL_LAYERS) != GLOBAL_LAYERS:
        return LlamaCpp(reason=f"llama.cpp's RoPE flags act on the {GLOBAL_LAYERS} layers only, not '{layer_type}'")
    if not types and config.model_type in LLAMA_CPP_SLIDING_KEEPS_ROPE:
        return LlamaCpp(
            reason=f"llama.cpp's RoPE flags leave a {config.model_type} model's sliding-window layers at their "
            "own RoPE, and transformers scales every layer"
        )
    theta = () if params["rope_theta"] == base["rope_theta"] else ("--rope-freq-base", _number(params["rope_theta"]))
    context = ("--ctx-size", str(length))
    if kind == "default":  # static NTK: a larger θ
        return LlamaCpp((*theta, *context))
    if kind == "linear":
        return LlamaCpp(("--rope-scaling", "linear", "--rope-scale", _number(params["factor"]), *theta, *context))
    if kind == "yarn":
        factor = float(params["factor"])
        if params.get("truncate") is False:
            return LlamaCpp(
                reason="llama.cpp rounds YaRN's ramp ends to whole dimensions (truncate true); this scaling does not"
            )
        ours, theirs = rope_from_hf_config(scaled, layer_type).attention_scaling, _yarn_mscale(factor)
        if not math.isclose(ours, theirs, rel_tol=1e-6):
            return LlamaCpp(
                reason=f"llama.cpp's YaRN attention factor is 0.1 ln s + 1 = {theirs:.6g} (--yarn-attn-factor is "
                f"overridden while YaRN is on); this scaling's is {ours:.6g} (the GGUF key "
                f"<arch>.rope.scaling.attn_factor = {ours / theirs:.6g} would give it)"
            )
        original = params.get("original_max_position_embeddings") or config.max_position_embeddings
        return LlamaCpp(
            (
                "--rope-scaling",
                "yarn",
                "--rope-scale",
                _number(factor),
                "--yarn-orig-ctx",
                str(int(original)),
                "--yarn-beta-fast",
                _number(params.get("beta_fast") or 32.0),
                "--yarn-beta-slow",
                _number(params.get("beta_slow") or 1.0),
                *theta,
                *context,
            )
        )
    reasons = {
        "dynamic": "llama.cpp has no dynamic NTK (--rope-scaling takes none, linear or yarn)",
        "llama3": "llama.cpp takes Llama 3's per-frequency factors from the GGUF's rope_freqs tensor, not a flag "
        "(convert_hf_to_gguf.py writes it from the exported config.json)",
        "longrope": "llama.cpp takes LongRoPE's per-frequency factors from a Phi-3 GGUF's rope_factors_long/short "
        "tensors, not a flag",
    }
    return LlamaCpp(reason=reasons.get(kind, f"llama.cpp has no flag for rope_type '{kind}'"))


def checkpoint_dtype(config: Any) -> torch.dtype:
    """The dtype a checkpoint's config declares for its weights (``dtype``, transformers 4's
    ``torch_dtype``), float32 where it declares none (a GGUF file dequantizes to float32)."""
    declared = config.dtype if hasattr(config, "dtype") else getattr(config, "torch_dtype", None)
    if isinstance(declared, str):
        declared = getattr(torch, declared, None)
    return declared if isinstance(declared, torch.dtype) and declared.is_floating_point else torch.float32


@dataclass(frozen=True)
class ExportPlan:
    """What ``posenc export`` writes, checked before any weight is read: the source and its config,
    the exported ``scaled`` config, the context ``length`` it is for, the layer type the scale acts
    on, the target ``folder`` and the llama.cpp flags."""

    source: Source
    config: Any
    scaled: Any
    scale: NoScale
    length: int
    layer_type: str | None
    folder: Path
    llama_cpp: LlamaCpp

    @property
    def rope(self) -> dict[str, Any]:
        """The exported RoPE settings of the scaled layers, as config.json holds them."""
        return rope_parameters(self.scaled, self.layer_type)


def plan_export(
    source: Source,
    config: Any,
    scale: NoScale,
    name: str,
    folder: Path,
    factor: float | None = None,
    force: bool = False,
    scaled_layers: str | None = None,
) -> ExportPlan:
    """Every check that can fail on user input, before any weight is read or file written:
    ``folder`` free (absent or empty; ``force``: replaced; never the model's own), ``factor`` given where the scale
    ``name`` takes one (and only there), the layer type a scale acts on, the scale on the model's
    RoPE (LongRoPE's factor count) and on its shipped rescaling (a config transformers reads:
    ``llama_config_for``). The exported context is the factor times the original context (the
    model's own ``max_position_embeddings`` unscaled)."""
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out '{folder}' is a file; give a folder to write the checkpoint into")
    model = Path(source.path).resolve() if source.kind != "hub" else None
    if model is not None and (model == folder.resolve() or folder.resolve() in model.parents):
        raise ConfigError(f"--out '{folder}' holds the model being exported; give another folder")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise ConfigError(f"--out '{folder}' exists and is not empty; give a new folder, or --force to replace it")
    own = getattr(scale, "factor", None)
    if factor is not None and own != factor:
        raise ConfigError(
            f"--factor does not apply to --scale {name}"
            + ("" if type(scale) is NoScale else " (its frequencies follow the length or its own settings)")
        )
    if own is None and hasattr(scale, "factor") and not scale.length_dependent:
        raise ConfigError(f"--scale {name} needs --factor: the context becomes factor x the original one")
    layer_type = scaled_layer_type_of(config, scaled_layers)
    rope = rope_from_hf_config(config, layer_type)
    scale.check(rope)
    length = exported_context(config, scale, layer_type)
    scaled = llama_config_for(config, scale, rope.rot_dim, length, layer_type)
    flags = llama_cpp_flags(config, scaled, length, layer_type)
    return ExportPlan(source, config, scaled, scale, length, layer_type, folder, flags)


def exported_context(config: Any, scale: NoScale, layer_type: str | None = None) -> int:
    """The context a scaled model is for: the factor times the original context, of ``scale`` or,
    for ``none``, of the rescaling the model ships (its ``max_position_embeddings`` when none)."""
    effective = scale if type(scale) is not NoScale else scale_from_hf_config(config, layer_type)
    if type(effective) is NoScale:
        return int(config.max_position_embeddings)
    original = effective.original_length
    return round(effective.factor_for(original) * original)


def write_export(plan: ExportPlan, dtype: torch.dtype | None = None) -> Path:
    """The plan's folder written: the source's weights read in ``dtype`` (default the checkpoint's
    own, ``checkpoint_dtype``) and saved as they are, with the scaled config and the tokenizer
    (``save_hf_model``; written beside the folder, then renamed into place)."""
    hf, tokenizer = load_transformers(plan.source, dtype or checkpoint_dtype(plan.config))
    with quiet_loading(gguf=False):  # no "Writing model shards" bar from transformers
        return save_hf_model(hf, plan.scaled, tokenizer, plan.folder)
