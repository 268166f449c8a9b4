"""Real pretrained models: a Hugging Face folder, a GGUF file or a hub id, as a posenc ``CausalLM``.

Every RoPE family of ``posenc.models.families`` loads (Llama into posenc's own ``CausalLM``, the
others as transformers' modules with posenc's RoPE injected), with logits equal to transformers'.
The model's own RoPE settings come with it (θ, per layer type where it has several, partial rotary,
a shipped ``rope_scaling``), and its original context (``original_max_position_embeddings``, else
``max_position_embeddings``) is what a rescaling is measured against.

Every check that can fail on user input (missing extra, path, tokenizer, architecture, hub id
while offline) runs in ``resolve_source`` and ``read_config``, before any weight is read. A hub id
already in the local Hugging Face cache is read from there, with no network request and no need
for ``HF_HUB_OFFLINE``. Weights load in the dtype asked for, never through a float32 copy.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from posenc.core.dtypes import torch_dtype
from posenc.core.errors import UserError
from posenc.models.families import family_of, supported
from posenc.models.hf import rope_parameters

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
EXTRA = "pip install 'posenc[hf]'"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class Source:
    """Where a model comes from: ``kind`` folder, gguf or hub; ``path`` the folder (the GGUF
    file's folder) or the hub id; ``gguf_file`` the file's name inside it; ``hub_id`` the id a
    folder of the local Hugging Face cache was named by (a cached snapshot is a folder)."""

    kind: str
    path: str
    gguf_file: str | None = None
    hub_id: str | None = None

    @property
    def name(self) -> str:
        """A short label for run folders and tables."""
        return Path(self.gguf_file or self.hub_id or self.path).name.removesuffix(".gguf")

    def kwargs(self) -> dict[str, Any]:
        return {"gguf_file": self.gguf_file} if self.gguf_file else {}

    def model_kwargs(self) -> dict[str, Any]:
        """``kwargs`` for a model's ``from_pretrained``: a GGUF file's weights unpacked into dense
        tensors of the dtype asked for, the weights posenc's forward reads. transformers releases
        that have ``GgufConfig`` can keep a quantized file's weights packed (for the architectures
        it has kernels for, looked up on the hub), and warn on every bfloat16 load of a quantized
        file that packed weights compute in float32, whether or not they stay packed;
        ``dequantize=True`` asks for the dense model up front. Earlier releases always unpack."""
        if not self.gguf_file:
            return {}
        import transformers

        config = getattr(transformers, "GgufConfig", None)
        return self.kwargs() | ({"quantization_config": config(dequantize=True)} if config else {})


def require_hf(gguf: bool = False) -> None:
    """A ``UserError`` naming the extra when transformers (or, for a .gguf file, gguf and
    accelerate, which transformers requires to read one) is missing."""
    needed = ("transformers", "tokenizers") + (("gguf", "accelerate") if gguf else ())
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"--model with a real model needs {', '.join(missing)}: {EXTRA}")


def _offline() -> bool:
    return any(
        os.environ.get(k, "").lower() in ("1", "true", "yes", "on") for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def cached_snapshot(repo_id: str) -> Path | None:
    """The folder of ``repo_id``'s snapshot in the local Hugging Face cache (``HF_HUB_CACHE``; the
    revision ``refs/main`` names), when it holds a config.json and a tokenizer; else None. Reads
    the disk only: no network request, whatever ``HF_HUB_OFFLINE`` says."""
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # not cached (LocalEntryNotFoundError), or an id the cache cannot name
        return None
    complete = (folder / "config.json").is_file() and any((folder / f).is_file() for f in TOKENIZER_FILES)
    return folder if complete else None


def _check_hub(repo_id: str, timeout: float = 5.0) -> None:
    if _offline():
        raise UserError(
            f"--model '{repo_id}' is a hub id, but the hub is offline (HF_HUB_OFFLINE is set) and the local "
            "Hugging Face cache holds no complete copy; "
            "give a local folder or .gguf file"
        )
    from huggingface_hub import HfApi

    try:
        HfApi().model_info(repo_id, timeout=timeout)
    except Exception as e:  # no network, unknown id, gated repo: all mean it cannot be loaded
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(
            f"--model '{repo_id}': cannot reach it on the hub ({reason}), nor is a complete copy in the local "
            "Hugging Face cache; give a local folder or .gguf file"
        ) from None


def resolve_source(spec: str) -> Source:
    """What ``--model`` names, checked: an existing folder with config.json and a tokenizer,
    an existing .gguf file, or a hub id: its snapshot folder in the local Hugging Face cache when
    a complete one is there (no network request at all), else one the hub answers for."""
    path = Path(spec).expanduser()
    if path.is_dir():
        require_hf()
        if not (path / "config.json").is_file():
            raise UserError(f"--model folder '{spec}' has no config.json; give a Hugging Face checkpoint folder")
        if not any((path / f).is_file() for f in TOKENIZER_FILES):
            raise UserError(
                f"--model folder '{spec}' has no tokenizer ({', '.join(TOKENIZER_FILES)}); "
                "save the tokenizer beside the weights"
            )
        return Source("folder", str(path))
    if path.is_file():
        if path.suffix != ".gguf":
            raise UserError(f"--model file '{spec}' is not a .gguf file; give a .gguf file or a checkpoint folder")
        require_hf(gguf=True)
        return Source("gguf", str(path.parent), path.name)
    if spec.endswith(".gguf") or not HUB_ID.match(spec):
        raise UserError(
            f"--model '{spec}' does not exist; give a checkpoint folder, a .gguf file or a hub id (owner/name)"
        )
    require_hf()
    snapshot = cached_snapshot(spec)
    if snapshot is not None:  # read as the folder it is: transformers and the hub client never go online
        return Source("folder", str(snapshot), hub_id=spec)
    _check_hub(spec)
    return Source("hub", spec)


def read_config(source: Source) -> Any:
    """The model's Hugging Face config, refused unless the architecture is one posenc loads."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(source.path, **source.kwargs())
    except Exception as e:
        raise UserError(f"--model '{source.path}': cannot read its config ({str(e).splitlines()[0]})") from None
    try:
        family_of(config)
    except UserError:
        kind = getattr(config, "model_type", None)
        raise UserError(f"--model '{source.name}' is a '{kind}' model; supported: {supported()}") from None
    return config


def original_context(config: Any) -> int:
    """The context the model was trained at: ``original_max_position_embeddings`` when its
    rope_scaling names one, else ``max_position_embeddings``."""
    params = rope_parameters(config)
    return int(params.get("original_max_position_embeddings") or config.max_position_embeddings)


def check_dtype(name: str) -> torch.dtype:
    """The weights' dtype of ``--dtype`` / ``model.dtype``, in either spelling (bf16 or bfloat16)."""
    return torch_dtype(name, "--dtype")


@dataclass
class Pretrained:
    """A loaded real model: the posenc LM (a ``CausalLM`` or an ``InjectedLM``), its tokenizer, its
    HF config and where it came from."""

    lm: torch.nn.Module
    tokenizer: Any
    config: Any
    source: Source

    @property
    def original_length(self) -> int:
        return original_context(self.config)


@contextmanager
def quiet_loading(gguf: bool) -> Iterator[None]:
    """No progress bar from transformers while a model loads (posenc reports progress through its
    own events; the library never prints), the previous setting restored afterwards.

    transformers' GGUF reader draws a tqdm bar of its own ("Converting and de-quantizing GGUF
    tensors...") that ``disable_progress_bar`` does not reach (transformers 5.24); it writes to
    ``sys.stderr``, so a GGUF load runs with stderr sent to a buffer, and the warnings raised
    meanwhile are issued again afterwards, to whatever shows warnings then.
    """
    from transformers.utils import logging

    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    stderr = contextlib.redirect_stderr(io.StringIO()) if gguf else contextlib.nullcontext()
    with warnings.catch_warnings(record=True) as caught:
        try:
            with stderr:
                yield
        finally:
            if enabled:
                logging.enable_progress_bar()
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def load_transformers(source: Source, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """transformers' model (eval mode, weights read straight into ``dtype``: a bf16 checkpoint
    asked for in bf16 never exists in float32; a GGUF file dequantizes into it) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with quiet_loading(gguf=source.gguf_file is not None):
        tokenizer = AutoTokenizer.from_pretrained(source.path, **source.kwargs())
        hf = AutoModelForCausalLM.from_pretrained(source.path, dtype=dtype, **source.model_kwargs())
    return hf.eval(), tokenizer


def load_pretrained(
    source: Source,
    config: Any,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    scaled_layer_type: str | None = None,
) -> Pretrained:
    """Read the weights in ``dtype`` (``load_transformers``), convert, move to ``device``: rotary
    frequencies and cos/sin stay float32 (``RoPE._apply``). ``scaled_layer_type``: the layer type
    whose RoPE a scaling acts on, where each has its own (``families.scaled_layer_type_of``)."""
    hf, tokenizer = load_transformers(source, dtype)
    lm = family_of(config).convert(hf, scaled_layer_type)
    del hf
    return Pretrained(lm.to(device=device, dtype=dtype).eval(), tokenizer, config, source)


# What the process holds before any model: python, torch, transformers and posenc imported (739 MiB
# of RSS measured on CPU, torch 2.14 and transformers 5.24)
RUNTIME_BYTES = 3 << 28


def peak_bytes(config: Any, length: int, dtype: torch.dtype = torch.float32, chunk: int = 1024) -> int:
    """Peak memory of one scored forward over ``length`` tokens, estimated from the HF config
    before any weight is read: the weights, the widest activations of a block, a few chunks of
    float32 logits, and the runtime (``RUNTIME_BYTES``). Attention is causal SDPA, O(length) memory
    on CPU and CUDA alike. In bf16 or fp16 the weights count twice: on CPU a half-precision forward
    holds about as much again as the model's weights beyond what a float32 one holds (SmolLM2-135M
    at 2,048 tokens: 507 MiB over the loaded model in bf16, 268 MiB in float32; converted copies
    for the matmuls, presumably), which on CUDA only errs on the safe side. Measured on CPU (``/usr/bin/time
    -v posenc extrapolate``), SmolLM2-135M from its GGUF file peaked at 1.80 GiB RSS at 16,384 tokens
    in float32 (this estimate: 2.45 GiB), and at 8,192 tokens at 1.73 GiB in float32 (2.13 GiB) and
    1.69 GiB in bf16 (1.97 GiB; without counting the weights twice, and with 0.5 GiB for the
    runtime, it gave 1.47 GiB)."""
    d, v, mlp = config.hidden_size, config.vocab_size, config.intermediate_size
    heads = config.num_attention_heads
    hd = getattr(config, "head_dim", None) or d // heads
    size = torch.finfo(dtype).bits // 8
    activations = length * (6 * d + 4 * heads * hd + 3 * mlp) * size
    weights = _n_params(config) * size * (1 if size >= 4 else 2)
    return weights + activations + 3 * chunk * v * 4 + length * 64 + RUNTIME_BYTES


def finetune_peak_bytes(config: Any, length: int, dtype: torch.dtype = torch.float32) -> int:
    """Peak memory of fine-tuning at ``length`` tokens (batch 1) and scoring the result: seven
    sets of weights (the base model, its trained copy, gradients, AdamW's two moments, the saved
    checkpoint loaded back, one spare for loading), every layer's activations kept for the backward
    pass, full-vocabulary float32 logits with their log-softmax and gradient, and the runtime
    (``RUNTIME_BYTES``). Measured on CPU: SmolLM2-135M fine-tuned at 512 tokens peaked at 4.63 GiB
    RSS; this estimate gives 5.50 GiB."""
    d, v, mlp = config.hidden_size, config.vocab_size, config.intermediate_size
    heads = config.num_attention_heads
    hd = getattr(config, "head_dim", None) or d // heads
    size = torch.finfo(dtype).bits // 8
    kept = config.num_hidden_layers * length * (12 * d + 4 * heads * hd + 5 * mlp) * size
    return 7 * _n_params(config) * size + kept + 3 * length * v * 4 + RUNTIME_BYTES


def _n_params(config: Any) -> int:
    d, v, mlp = config.hidden_size, config.vocab_size, config.intermediate_size
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads  # GPT-NeoX has no grouped heads
    hd = getattr(config, "head_dim", None) or d // heads
    per_layer = d * (heads * hd + 2 * kv * hd) + heads * hd * d + 3 * d * mlp
    return v * d * (1 if config.tie_word_embeddings else 2) + config.num_hidden_layers * per_layer


def available_bytes(device: torch.device | str) -> int:
    """Free memory on ``device``: CUDA's free memory, else the host's MemAvailable."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import psutil

    return int(psutil.virtual_memory().available)
