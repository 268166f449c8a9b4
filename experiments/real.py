"""Length extrapolation of a real pretrained model: perplexity by length under RoPE rescalings.

The protocol of the PI and YaRN papers on real text. Tokens are the built-in corpus (one
document per pydoc topic) or ``real.data`` (a UTF-8 file, or every file of a folder in sorted
order, one document each), tokenized with the model's tokenizer and concatenated with its EOS
token between documents.

Window rule (recompute any cell with transformers alone): with L_max the longest evaluated
length, window w (w = 0 … W−1) of length L is ``tokens[w·L_max : w·L_max + L]``: the first
starts at token 0, each next one at the end of the previous longest window, and a shorter
length scores the prefix of the same window. A window of L tokens scores its L−1 next-token
predictions; ``ppl`` is exp of their mean loss, ``tail_ppl`` exp of the mean over the last
min(K, L−1) of them, and the loss by position is averaged over the windows in buckets. With
two windows or more, ``ratios.csv`` compares each pair of scales at each length, paired by
window, with a t interval over windows (``window_ratios``).

A causal model scores a prefix exactly as it scores the shorter window, so a scaling whose
frequencies do not depend on the length is run once per window at L_max and read at every
length (the factor, when not given, is fixed at max(1, L_max / original context)); dynamic NTK
and LongRoPE get a forward per length (``length_dependent``). The row ``none`` is the model as
shipped, always in the table. On a model that ships no rescaling, a scaling is computed from its
θ against its original context; on one that ships a static rescaling (linear, YaRN, Llama 3),
PI stacks on it (the shipped frequencies divided by the factor) and any other scaling is refused
with one line, as is anything on a shipped dynamic NTK or LongRoPE (``check_stacking``).

With ``finetune_steps`` each chosen scaling (not the baseline) also gets a fine-tuned copy, as
PI and YaRN extend a model: that many AdamW steps at the longest length with the scaling
installed, on windows of the model's own tokens taken after the evaluated ones (never scored).
It is saved as a Hugging Face checkpoint (``finetuned/<scale>+ft<N>/``: model.safetensors, a
config.json carrying the scaling as ``rope_scaling``, the tokenizer files), which is then loaded
back and scored as the row ``<scale>+ft<N>`` (perplexity only; passkey runs on the base model).

The protocol is configuration: ``experiment=real`` (configs/experiment/real.yaml) picks the
``model`` option ``pretrained`` (``model.path``: a Hugging Face folder, a .gguf file or a hub id;
``model.dtype``; ``model.device``) and holds these settings under ``real:`` (``RealSettings``), so it
is swept like every protocol (``posenc sweep experiment=real model.path=… real.factor=2,4``) and
``posenc extrapolate --model PATH`` is a shortcut that composes the same config.

A cell (scale, forward length, window; or a passkey trial) is written once scored into the cell
store ``<cache>/real/<model>-<hash>/cells/`` (``Cells``; ``cache_dir``, default ``<results
root>/cache``, a sweep job's results root being its sweep's), named by the settings' hash less
those that only add cells (``windows``, passkey depths, and the scales: cells are keyed by their
scale). Every run, sweep job or later sweep that points at the same store skips the cells it
finds there and scores only the missing ones; fine-tuned copies are kept there too. The run
folder (``<results root>/runs/real-<model>-<hash>``, the hash less ``windows`` and passkey depths)
holds the tables, which pool exactly the cells asked for, and ``cells.jsonl``, those cells.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import torch
import yaml
from omegaconf import DictConfig, OmegaConf

from posenc.analysis.stats import paired_difference, wilson_interval
from posenc.core.dtypes import slow_dtype_line
from posenc.core.errors import ConfigError, UserError
from posenc.core.io import atomic_write_text, write_json
from posenc.engine.config import (
    experiment_settings,
    instantiate,
    option_class,
    option_node,
    options_where,
    target_class,
)
from posenc.engine.context import Result, RunContext, TableSpec
from posenc.engine.results import config_hash
from posenc.engine.training import resolve_device
from posenc.experiments.real_ruler import (
    Chosen,
    check_fits,
    chosen_task,
    labelled_depths,
    prompts_of,
    ruler_plan,
    ruler_table,
    ruler_trials,
    score_ruler,
    write_prompts,
)
from posenc.models import pretrained
from posenc.models.families import FAMILIES, describe_rope, family_of, remap_refusal, scaled_layer_type_of
from posenc.models.hf import llama_config_for, rope_parameters, save_hf_llama, scale_from_hf_config
from posenc.pe.remap.base import NoRemap
from posenc.pe.rope import RoPE
from posenc.pe.scaling import PI, DynamicNTK, LongRoPE, NoScale
from posenc.reporting.style import figure_format, pyplot, save_figure
from posenc.tasks.ruler.base import text_start


@dataclass(frozen=True)
class Checkpoint:
    """The ``model`` option of a real pretrained model (configs/model/pretrained.yaml): ``path`` a
    Hugging Face folder, a .gguf file or a hub id, ``dtype`` of its weights (RoPE stays float32),
    ``device`` auto, cpu, cuda, cuda:N or mps, ``scaled_layers`` the layer type a scaling acts on in
    a model whose layer types have their own RoPE (Gemma 3; default its global layers; given as
    ``+model.scaled_layers=sliding_attention``, so the cache keys of the others stay as they were).
    ``experiment=real`` scores it; nothing trains it."""

    trains: ClassVar[bool] = False  # posenc's own model options train; a checkpoint is only scored
    path: str
    dtype: str = "float32"
    device: str = "auto"
    scaled_layers: str | None = None


@dataclass
class RealSettings:
    """The ``real:`` node of ``experiment=real``; ``scales`` without ``none`` get it first."""

    scales: list[str] = field(default_factory=lambda: ["none"])
    lengths: list[int] = field(default_factory=lambda: [2048, 4096])
    windows: int = 1
    tail: int = 1024
    buckets: int = 32
    factor: float | None = None
    data: str | None = None
    chunk: int = 1024
    passkey_depths: list[float] | None = None
    passkey_trials: int = 20
    finetune_steps: int = 0
    finetune_lr: float = 2e-5

    def __post_init__(self) -> None:
        self.scales = ["none", *dict.fromkeys(s for s in self.scales if s != "none")]
        self.lengths = sorted(set(self.lengths))
        for name, value, low in (
            ("windows", self.windows, 1),
            ("tail", self.tail, 1),
            ("buckets", self.buckets, 1),
            ("chunk", self.chunk, 1),
            ("passkey_trials", self.passkey_trials, 1),
            ("finetune_steps", self.finetune_steps, 0),
        ):
            if value < low:
                raise ConfigError(f"real.{name} must be >= {low}, got {value}")
        if not self.lengths or self.lengths[0] < 2:
            raise ConfigError(f"real.lengths must be >= 2 tokens each, got {self.lengths}")
        if self.passkey_depths is not None and any(not 0 <= d <= 100 for d in self.passkey_depths):
            raise ConfigError(f"real.passkey_depths are percentages in 0..100, got {self.passkey_depths}")
        if self.factor is not None and not self.factor >= 1:
            raise ConfigError(f"real.factor must be >= 1, got {self.factor}")


def length_dependent(scale: NoScale) -> bool:
    """Whether the scale's frequencies change with the evaluated length (one forward per length):
    the class's ``length_dependent`` fact, or a factor left to follow the evaluated length."""
    return type(scale).length_dependent or getattr(scale, "factor", 0) is None


def rope_scale_names() -> list[str]:
    return options_where("scale", lambda cls: cls is NoScale or cls.applies(RoPE(8)))


def build_scale(name: str, original_length: int, factor: float | None) -> NoScale:
    """The scale option ``name`` measured against the model's original context; ``factor`` (the
    fixed factor of the run) replaces the option's unless the option is dynamic NTK, whose
    factor is Hugging Face's multiplier."""
    valid = rope_scale_names()
    if name not in valid:
        raise ConfigError(
            f"scale '{name}' (real.scales) does not rescale a real model's RoPE; valid: {', '.join(valid)}"
        )
    node = option_node("scale", name)
    if "original_length" in node:
        node["original_length"] = original_length
    scale = instantiate(node, f"scale/{name}")
    if isinstance(scale, LongRoPE):
        return scale
    if "factor" in node and not isinstance(scale, DynamicNTK) and node["factor"] is None:
        scale.factor = factor
    return scale


def documents(data: str | None) -> list[str]:
    """The texts to tokenize: one per pydoc topic, or the real.data file, or each file of a folder."""
    if data is None:
        from posenc.tasks.text import builtin_documents

        return builtin_documents()
    path = Path(data).expanduser()
    if not path.exists():
        raise UserError(f"real.data '{data}' does not exist; give a UTF-8 text file or a folder of them")
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    texts = []
    for f in files:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"real.data file '{f}' is not UTF-8 text") from None
    if not any(texts):
        raise UserError(f"real.data '{data}' holds no text")
    return texts


def tokenize(tokenizer: Any, texts: Sequence[str]) -> torch.Tensor:
    """(n,) token ids: each text tokenized without special tokens, EOS between texts."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise UserError("the model's tokenizer has no EOS token to join documents with")
    ids: list[int] = []
    for i, text in enumerate(texts):
        if i:
            ids.append(eos)
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
    return torch.tensor(ids, dtype=torch.long)


PASSKEY_INTRO = (
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important information there."
)
PASSKEY_FILLER = (
    " The grass is green.",
    " The sky is blue.",
    " The sun is yellow.",
    " Here we go.",
    " There and back again.",
)
PASSKEY_NEEDLE = " The pass key is {key}. Remember it. {key} is the pass key."
PASSKEY_QUESTION = " What is the pass key? The pass key is"
PASSKEY_CHANCE = 1 / 90000  # a uniform guess of a five-digit key (10000..99999)
# Cells of an older prompt or verdict are not reused: the prefix of every passkey cell's key. v2:
# whole sentences around the needle, greedy decoding's text stored and parsed (passkey_verdict).
PASSKEY_CELLS = "passkey-v2"


def passkey_key(trial: int) -> int:
    """The five-digit key of trial ``trial`` (fixed, so every scale and length sees the same)."""
    import random

    return random.Random(1000 + trial).randint(10000, 99999)


@dataclass(frozen=True)
class PasskeyPrompt:
    """A passkey prompt and its answer: ``ids`` (prompt, then the answer's ``answer`` tokens),
    the needle's tokens ``ids[needle:needle_end]``, the question's from ``question``."""

    ids: torch.Tensor
    answer: int
    needle: int
    needle_end: int
    question: int

    @property
    def prompt(self) -> torch.Tensor:
        return self.ids[: -self.answer]


def passkey_prompt(tokenizer: Any, length: int, depth: float, key: int) -> PasskeyPrompt:
    """The PI/LongRoPE passkey prompt of at most ``length`` tokens, answer included: the intro,
    whole filler sentences (cycling), the needle "The pass key is NNNNN. Remember it. NNNNN is
    the pass key." after round(``depth`` % of them) sentences, the question "What is the pass key?
    The pass key is", the answer " NNNNN". As many sentences as fit, so the prompt is short of
    ``length`` by less than one sentence; 100 puts the needle right before the question, 0 right
    after the intro (the tokenizer's start tokens, ``text_start``, before it). Each piece starts
    at a word (a leading space) and is tokenized on its own, so no piece is cut and the
    concatenation is how a byte-level BPE tokenizes the whole text."""

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    intro, needle = text_start(tokenizer) + ids(PASSKEY_INTRO), ids(PASSKEY_NEEDLE.format(key=key))
    question, answer = ids(PASSKEY_QUESTION), ids(f" {key}")
    sentences = [ids(t) for t in PASSKEY_FILLER]
    budget = length - len(intro) - len(needle) - len(question) - len(answer)
    if budget < 0:
        raise UserError(
            f"real.lengths {length} is too short for the passkey prompt ({length - budget} tokens without filler)"
        )
    filler: list[list[int]] = []
    while budget >= len(sentences[len(filler) % len(sentences)]):
        budget -= len(sentences[len(filler) % len(sentences)])
        filler.append(sentences[len(filler) % len(sentences)])
    cut = round(depth / 100 * len(filler))
    before = intro + [t for s in filler[:cut] for t in s]
    after = [t for s in filler[cut:] for t in s]
    out = before + needle + after + question + answer
    return PasskeyPrompt(
        torch.tensor(out, dtype=torch.long),
        len(answer),
        len(before),
        len(before) + len(needle),
        len(before) + len(needle) + len(after),
    )


def passkey_verdict(text: str, key: int) -> bool | None:
    """Exact match of the key in greedy decoding's text after the question: True when, leading
    whitespace dropped, it starts with the key's five digits and then a character that is not a
    digit; False once it cannot (another character first, a wrong digit, a sixth digit); None
    while the text so far is a prefix of a match (decoding goes on)."""
    text, digits = text.lstrip(), str(key)
    if text.startswith(digits):
        return None if len(text) == len(digits) else not text[len(digits)].isdigit()
    return None if digits.startswith(text) else False


@dataclass(frozen=True)
class Forward:
    """One forward pass: a scale at ``length`` on window ``window``, read at ``serves`` lengths."""

    scale: str
    length: int
    window: int
    serves: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"{self.scale}/{self.length}/{self.window}"


def plan_forwards(scales: dict[str, NoScale], lengths: Sequence[int], windows: int) -> list[Forward]:
    longest = max(lengths)
    out = []
    for name, scale in scales.items():
        groups = [(n, (n,)) for n in lengths] if length_dependent(scale) else [(longest, tuple(lengths))]
        out += [Forward(name, n, w, serves) for w in range(windows) for n, serves in groups]
    return out


def bucket_edges(longest: int, buckets: int) -> list[int]:
    """Bucket boundaries over the L_max − 1 scored positions (equal spans)."""
    n = longest - 1
    return sorted({round(i * n / buckets) for i in range(buckets + 1)})


def score(losses: torch.Tensor, length: int, tail: int, edges: Sequence[int]) -> dict[str, Any]:
    """Sums for one cell from the (≥ L−1,) losses of a window's predictions."""
    part = losses[: length - 1].double()
    k = min(tail, length - 1)
    spans = [(a, min(b, length - 1)) for a, b in zip(edges, edges[1:]) if a < length - 1]
    return {
        "loss_sum": float(part.sum()),
        "count": length - 1,
        "tail_sum": float(part[-k:].sum()),
        "tail_count": k,
        "bucket_sums": [float(part[a:b].sum()) for a, b in spans],
        "bucket_counts": [b - a for a, b in spans],
    }


def shipped_rope(config: Any) -> tuple[str, NoScale]:
    """The model's own RoPE: "θ = …, rope_type …" for tables (per layer type where each has its
    own), and the posenc scale of the layers a scaling acts on."""
    return describe_rope(config), scale_from_hf_config(config)


def check_stacking(name: str, scale: NoScale, shipped: NoScale) -> None:
    """A scale on top of a shipped rescaling: PI stacks on a static one (the shipped frequencies
    divided by its factor, i.e. positions / s on top of what the model does); any other scale
    rescales θ's own frequencies, which the shipped rescaling has already changed, so it is refused,
    as is anything on a rescaling that follows the length (dynamic NTK, LongRoPE)."""
    if type(scale) is NoScale or type(shipped) is NoScale:
        return
    valid = "none" if shipped.length_dependent else "none, pi (divides the shipped frequencies by the factor)"
    if shipped.length_dependent or not isinstance(scale, PI):
        raise ConfigError(
            f"scale '{name}' (real.scales) is not defined on top of the model's own rescaling "
            f"({shipped.hf_rope_type or type(shipped).__name__}); valid on this model: {valid}"
        )


class Model:
    """The loaded model with one scale installed at a time (``none``: as shipped; on a model that
    ships a rescaling, PI divides the shipped frequencies, ``check_stacking``)."""

    def __init__(self, loaded: pretrained.Pretrained, remap: NoRemap | None = None) -> None:
        self.loaded, self.lm = loaded, loaded.lm
        self.remap = remap  # a position remap on top of every scale (posenc.pe.remap); None: none
        self.shipped = (self.lm.pe.inv_freq.clone(), self.lm.pe.attention_scaling)
        self.stacks = type(shipped_rope(loaded.config)[1]) is not NoScale
        self.follows = self.lm.length_scale  # a shipped dynamic rescaling follows the length

    def install(self, scale: NoScale, length: int) -> torch.device:
        """Put ``scale`` in place for a forward over ``length`` tokens; the model's device."""
        lm = self.lm
        lm.pe.set_frequencies(*self.shipped)
        lm.follow_length(None)
        if self.remap is not None:
            lm.set_remap(self.remap)
        if type(scale) is NoScale:
            lm.follow_length(self.follows)
        elif self.stacks:  # PI on the shipped rescaling (check_stacking refused the rest)
            lm.pe.set_frequencies(self.shipped[0] / scale.factor_for(length), self.shipped[1])
        else:
            scale.apply(lm.pe, length)
        return lm.embed.weight.device

    @torch.no_grad()
    def losses(self, scale: NoScale, ids: torch.Tensor, chunk: int) -> torch.Tensor:
        """(s,) ids -> (s − 1,) float32 next-token losses under ``scale``."""
        device = self.install(scale, ids.numel())
        x = ids[None, :-1].to(device)
        return self.lm(x, targets=ids[None, 1:].to(device), chunk=chunk)[0].cpu()

    @torch.no_grad()
    def greedy_decode(
        self, scale: NoScale, ids: torch.Tensor, answer: int, done: Callable[[list[int]], bool], limit: int
    ) -> tuple[list[int], int]:
        """Greedy decoding after ``ids[:-answer]`` until ``done(tokens)`` or ``limit`` tokens, and
        the forwards it took. One forward over the prompt and its answer gives greedy's tokens up
        to the first that departs from the answer (until then greedy fed itself the answer's own
        prefix), or the answer and the token after it; each further token is one more forward: of
        that token alone against the keys and values cached (``kv_cache``), or, on a model without
        a cache, over the whole sequence again."""
        device = self.install(scale, ids.numel())
        prompt, expected = ids[:-answer], ids[-answer:].tolist()
        cache = self.lm.kv_cache()
        picks = self.lm(ids[None].to(device), last=answer + 1, cache=cache)[0].argmax(-1).tolist()  # (answer + 1,)
        out: list[int] = []
        for i, token in enumerate(picks):
            out.append(token)
            if done(out) or len(out) >= limit or (i < answer and token != expected[i]):
                break
        if cache is not None:  # the answer's tokens past those greedy kept are not its context
            cache.truncate(prompt.numel() + len(out) - 1)
        forwards = 1
        while not done(out) and len(out) < limit:
            if cache is None:
                x = torch.cat((prompt, torch.tensor(out, dtype=prompt.dtype)))[None]
            else:
                x = torch.tensor([out[-1:]], dtype=prompt.dtype)  # (1, 1): the newest token
            out.append(int(self.lm(x.to(device), last=1, cache=cache)[0, -1].argmax()))
            forwards += 1
        return out, forwards


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


@dataclass
class Prepared:
    """Everything a run needs before any weight is read: the checked settings, the model's
    config, the scales built against its original context, the tokenized text."""

    checkpoint: Checkpoint
    settings: RealSettings
    seed: int
    source: pretrained.Source
    config: Any
    original_length: int
    scales: dict[str, NoScale]
    device: torch.device
    factor: float
    tokenizer: Any
    tokens: torch.Tensor
    shipped: str
    remap: NoRemap = field(default_factory=NoRemap)  # built against the model's original context
    task: Chosen | None = None  # a RULER prompt task (task=ruler_…), scored beside the perplexity

    @property
    def finetuned(self) -> dict[str, NoScale]:
        """The scales fine-tuned (every chosen one but the baseline), by their row name."""
        steps = self.settings.finetune_steps
        return {f"{name}+ft{steps}": scale for name, scale in self.scales.items() if steps and name != "none"}

    def load(self, source: pretrained.Source | None = None) -> Model:
        """The checkpoint's weights (or those of ``source``, a fine-tuned copy) on the run's device."""
        source = source or self.source
        config = self.config if source is self.source else pretrained.read_config(source)
        dtype = pretrained.check_dtype(self.checkpoint.dtype)
        loaded = pretrained.load_pretrained(source, config, dtype, self.device, self.checkpoint.scaled_layers)
        return Model(loaded, self.remap if self.remap.active else None)


def device_of(checkpoint: Checkpoint, default: torch.device | None = None) -> torch.device:
    """``model.device`` resolved (``auto``: ``default`` when given, e.g. the run context's)."""
    if checkpoint.device == "auto" and default is not None:
        return default
    try:
        return resolve_device(checkpoint.device)
    except ConfigError as e:
        raise ConfigError(str(e).replace("train.device", "model.device")) from None


def build_remap(
    name: str,
    node: dict[str, Any],
    config: Any,
    original_length: int,
    longest: int,
    scaled_layers: str | None = None,
) -> NoRemap:
    """The remap option ``name`` (its config ``node``) measured against the model's original context
    and checked against the model (its remapped layers, those ``scaled_layers`` names or the family's
    scaled ones, take plain causal attention: ``remap_refusal``) and the longest length."""
    if "original_length" in node:
        node = {**node, "original_length": original_length}
    remap = instantiate(node, f"remap/{name}")
    if remap.active:
        family = family_of(config)
        layers = None if family.native else scaled_layer_type_of(config, scaled_layers or family.scaled_layer_type)
        why = remap_refusal(config, layers)
        if why:
            raise ConfigError(f"remap '{name}' cannot run on '{family.model_type}': {why}")
        remap.check_lengths(longest)
    return remap


def prepare(
    checkpoint: Checkpoint,
    settings: RealSettings,
    device: torch.device,
    seed: int = 0,
    remap: tuple[str, dict[str, Any]] | None = None,
    task: Chosen | None = None,
) -> Prepared:
    """Every check that can fail on user input, before any weight is read or file written.
    ``remap``: the remap option's name and config node (None: none); its rows read scale+remap.
    ``task``: a RULER prompt task, whose prompts must fit the shortest length (``check_fits``)."""
    source = pretrained.resolve_source(checkpoint.path)
    config = pretrained.read_config(source)
    dtype = pretrained.check_dtype(checkpoint.dtype)
    try:
        scaled_layer_type_of(config, checkpoint.scaled_layers)
    except ConfigError as e:
        raise ConfigError(f"model.scaled_layers: {e}") from None
    original = pretrained.original_context(config)
    longest = max(settings.lengths)
    factor = settings.factor or max(1.0, longest / original)
    if "all" in settings.scales:  # every RoPE scale that needs no per-model values
        settings.scales = [
            "none",
            *(n for n in rope_scale_names() if n != "none" and not getattr(option_class("scale", n), "requires", ())),
        ]
    scales = {name: build_scale(name, original, factor) for name in settings.scales}
    shipped, shipped_scale = shipped_rope(config)
    for name, scale in scales.items():
        check_stacking(name, scale, shipped_scale)
    remapped = build_remap(*remap, config, original, longest, checkpoint.scaled_layers) if remap else NoRemap()
    if remapped.active:
        if settings.finetune_steps:
            raise ConfigError(f"real.finetune_steps with remap '{remap[0]}': fine-tuning takes no remap; drop one")
        scales = {f"{name}+{remap[0]}": scale for name, scale in scales.items()}  # yarn+self_extend
    if settings.finetune_steps:
        check_finetune(settings, config, scales)
    need, have = pretrained.peak_bytes(config, longest, dtype, settings.chunk), pretrained.available_bytes(device)
    if settings.finetune_steps:
        need = max(need, pretrained.finetune_peak_bytes(config, longest, dtype))
    if need > have:
        task = " to fine-tune" if settings.finetune_steps else ""
        raise ConfigError(
            f"real.lengths {longest} needs about {_gib(need)}{task} on {device}, {_gib(have)} is available; "
            "give shorter lengths or another model.device"
        )
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.path, **source.kwargs())
    tokens = tokenize(tokenizer, documents(settings.data))
    need_tokens = settings.windows * longest + (longest + 1 if settings.finetune_steps else 0)
    if need_tokens > tokens.numel():
        what = " and one fine-tuning window after them" if settings.finetune_steps else ""
        raise ConfigError(
            f"{settings.windows} window(s) of {longest} tokens{what} need {need_tokens} tokens; "
            f"the text has {tokens.numel()}; give fewer real.windows, shorter real.lengths or more real.data"
        )
    if settings.passkey_depths:
        passkey_prompt(tokenizer, min(settings.lengths), 0, passkey_key(0))  # long enough for the prompt
    if task is not None:
        check_fits(task, tokenizer, settings.lengths)
    return Prepared(
        checkpoint,
        settings,
        seed,
        source,
        config,
        original,
        scales,
        device,
        factor,
        tokenizer,
        tokens,
        shipped,
        remap=remapped,
        task=task,
    )


def read_settings(cfg: DictConfig) -> tuple[Checkpoint, RealSettings]:
    """The ``model`` option (a ``Checkpoint``, its path given) and the ``real:`` settings, checked."""
    if cfg.get("real") is None:
        raise ConfigError("no real settings: compose with experiment=real")
    if target_class(cfg.model, "model") is not Checkpoint:
        raise ConfigError(
            f"experiment=real scores a pretrained checkpoint (model=pretrained model.path=...); "
            f"model '{cfg.choices.get('model')}' is one of posenc's own, trained by posenc train"
        )
    if OmegaConf.is_missing(cfg.model, "path"):
        raise ConfigError("model.path is missing: give a Hugging Face folder, a .gguf file or a hub id")
    return instantiate(cfg.model, "model"), experiment_settings(cfg, "real", RealSettings)


# The config keys a real-model run reads; the rest of the tree (pe, task, train, eval, scale)
# configures posenc's own models. ``seed`` is read only to fine-tune.
REAL_KEYS = ("real", "model", "seed", "cache_dir", "remap", "plots", "task")


def check_overrides(overrides: Sequence[str]) -> None:
    """An override of a key a real-model run does not read (``train.lr=…``, ``pe=…``, another
    ``model=…`` option; ``task.KEY=…`` unless ``task=…`` picks a task) is refused naming it and
    what it applies to."""
    keys = [override.lstrip("+~").split("=", 1)[0] for override in overrides]
    for override, key in zip(overrides, keys):
        root = key.split(".")[0].split("@")[0]
        if root not in REAL_KEYS or key == "model" or (root == "task" and key != "task" and "task" not in keys):
            raise UserError(
                f"override '{override}' applies to posenc's own models, not to a real model; "
                "a real model takes real.*, model.path, model.dtype, model.device, cache_dir, remap, plots.format "
                "and a RULER task (task=ruler_…, task.*)"
            )


def run_config(p: Prepared) -> dict[str, Any]:
    """What a run's cells depend on (and, less ``GROWABLE``, what names its folder)."""
    local = p.source.kind != "hub"
    return {
        "model": {
            "name": p.source.name,
            "path": str(Path(p.source.path).resolve()) if local else p.source.path,
            "gguf_file": p.source.gguf_file,
            "dtype": p.checkpoint.dtype,
            "device": str(p.device),
        },
        "real": {**asdict(p.settings), "factor": p.factor},
        "seed": p.seed if p.settings.finetune_steps else None,  # only fine-tuning draws random numbers
        "original_length": p.original_length,
        "tokens": int(p.tokens.numel()),
        "shipped_rope": p.shipped,
        # only when one is on, so the cells and folders of runs without a remap keep their hashes
        **({"remap": {"name": type(p.remap).__name__, **asdict(p.remap)}} if p.remap.active else {}),
        **({"task": {"name": p.task.name, **p.task.node}} if p.task else {}),  # a RULER task, likewise
    }


# Settings that add cells without changing a finished one (cells are keyed by window, trial and
# depth): a run with more windows or other depths reuses the run folder and the cells. The cell
# store is shared across the scales too (a cell is keyed by its scale).
GROWABLE = ("windows", "passkey_depths", "passkey_trials")
SHARED = (*GROWABLE, "scales")


def less(config: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """``config`` without the ``real`` settings ``keys``."""
    return {**config, "real": {k: v for k, v in config["real"].items() if k not in keys}}


class Cells:
    """The scored cells of one setting: ``<cache>/real/<model>-<hash>/`` with config.yaml (the
    settings), ``cells/<key>.json`` (one file per cell, e.g. ``cells/yarn/4096/0.json``, written
    atomically, so that jobs of one or several sweeps fill one store at once) and
    ``finetuned/<scale>+ft<N>/``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def open(cls, cache: Path, name: str, key: dict[str, Any]) -> Cells:
        path = Path(cache) / "real" / f"{name}-{config_hash(key)[:16]}"
        (path / "cells").mkdir(parents=True, exist_ok=True)
        if not (path / "config.yaml").is_file():
            atomic_write_text(path / "config.yaml", yaml.safe_dump(key, sort_keys=False))
        return cls(path)

    def read(self) -> dict[str, dict[str, Any]]:
        records = [json.loads(f.read_text()) for f in sorted((self.path / "cells").rglob("*.json"))]
        return {r["key"]: r for r in records}

    def add(self, record: dict[str, Any]) -> None:
        atomic_write_text(self.path / "cells" / f"{record['key']}.json", json.dumps(record))


class Real:
    """``experiment=real``: a real model's perplexity by length and position under each scale in
    ``real.scales``, passkey accuracy at ``real.passkey_depths``, and fine-tuned copies."""

    tables = (
        TableSpec(
            "table",
            keys=("scale", "metric"),
            pairs=("window",),
            main=True,
            description="ppl and tail_ppl by scale (rows) and length (columns), pooled over the windows",
        ),
        TableSpec(
            "per_position",
            keys=("scale", "length", "start"),
            pairs=("window",),
            description="mean loss by position bucket [start, end) at each length",
        ),
        TableSpec(
            "ratios",
            keys=("a", "b", "metric", "length"),
            pairs=("window",),
            description="each pair of scales: perplexity ratio paired by window, with a t interval (2+ windows)",
        ),
        TableSpec(
            "passkey",
            keys=("scale", "length", "depth"),
            pairs=("trial",),
            description="passkey exact match by scale, length and key depth (found of trials, Wilson interval, chance)",
        ),
        TableSpec(
            "passkey_trials",
            keys=("scale", "length", "depth", "trial"),
            description="every passkey trial: its key, the needle's and the question's token, greedy decoding's text",
        ),
        TableSpec(
            "ruler",
            keys=("task", "scale", "length", "depth"),
            pairs=("trial",),
            description="a RULER task's string_match_all and exact-match-all rate by scale, length and depth "
            "(trials, Wilson interval, wall time)",
        ),
        TableSpec(
            "ruler_trials",
            keys=("task", "scale", "length", "depth", "trial"),
            description="every RULER trial: the answers expected, greedy decoding's text, its score",
        ),
    )

    def __init__(self) -> None:
        self._prepared: dict[str, Prepared] = {}

    def prepare(self, cfg: DictConfig, device: torch.device | None = None) -> Prepared:
        """The run's ``Prepared``, made once per config and device (``check`` then ``run`` read
        the tokenizer and the text once)."""
        checkpoint, settings = read_settings(cfg)
        device = device_of(checkpoint, device)
        remap = None
        if cfg.get("remap") is not None and cfg.choices.get("remap") not in (None, "none"):
            remap = (str(cfg.choices.remap), OmegaConf.to_container(cfg.remap, resolve=True))
        task = chosen_task(cfg)
        memo = config_hash(
            {
                "model": asdict(checkpoint),
                "real": asdict(settings),
                "seed": cfg.get("seed"),
                "d": device,
                "r": remap,
                "t": task and (task.name, task.node),
            }
        )
        if memo not in self._prepared:
            self._prepared[memo] = prepare(checkpoint, settings, device, int(cfg.get("seed") or 0), remap, task)
        return self._prepared[memo]

    def check(self, cfg: DictConfig) -> None:
        """Everything ``run`` checks before reading a weight: the settings, the path, the
        architecture, the scales on its RoPE, the memory, the text (as ``ConfigError``s)."""
        try:
            figure_format(cfg)
            self.prepare(cfg)
        except ConfigError:
            raise
        except UserError as e:  # the checkpoint's own checks (pretrained.resolve_source, read_config)
            raise ConfigError(str(e)) from None

    def run(self, cfg: DictConfig, ctx: RunContext) -> Result:
        p = self.prepare(cfg, ctx.device)
        config = run_config(p)
        store = {k: v for k, v in config.items() if k != "task"}  # every task's: a RULER trial's key names it
        cells = Cells.open(ctx.cache_dir(cfg), p.source.name, less(store, SHARED))
        fmt = figure_format(cfg)  # a bad plots.format stops here, before any work
        with ctx.running(f"real-{p.source.name}", config, key=less(config, GROWABLE)) as run:
            return self.score(p, cells, ctx, run, fmt)

    def score(self, p: Prepared, cells: Cells, ctx: RunContext, run: Any, fmt: str = "png") -> Result:
        """Score every cell the store lacks, then pool the cells asked for into the tables (and
        the figures, in ``fmt``)."""
        s = p.settings
        done = cells.read()
        forwards = plan_forwards(p.scales, s.lengths, s.windows)
        tuned = {name: plan_forwards({name: scale}, s.lengths, s.windows) for name, scale in p.finetuned.items()}
        passkeys = [(c, passkey_cell(*c)) for c in passkey_plan(p)]
        rulers = ruler_plan(p.task, list(p.scales), s.lengths)
        planned = [f.key for f in forwards] + [f.key for fs in tuned.values() for f in fs] + [k for _, k in passkeys]
        planned += [k for _, k in rulers]
        reused = sum(k in done for k in planned)
        if reused:
            ctx.emit("message", f"resuming: {reused} forward pass(es) already scored")
        slow = slow_dtype_line(pretrained.check_dtype(p.checkpoint.dtype), p.device)
        if slow and len(planned) > reused:
            ctx.emit("message", slow, warning=True)
        model: Model | None = None
        todo = [f for f in forwards if f.key not in done]
        if todo:
            model = p.load()
            score_forwards(model, p.scales, todo, p, done, cells, ctx, "forward passes")
        for name, scale in p.finetuned.items():
            todo = [f for f in tuned[name] if f.key not in done]
            if not todo:
                continue
            folder = cells.path / "finetuned" / name
            if not (folder / "config.json").is_file():
                model = model or p.load()
                finetune(model, scale, p, folder, ctx)
            tuned_model = p.load(pretrained.Source("folder", str(folder)))
            score_forwards(tuned_model, {name: NoScale()}, todo, p, done, cells, ctx, f"scoring {name}")
        todo_keys = [(c, k) for c, k in passkeys if k not in done]
        if todo_keys:
            model = model or p.load()
            score_passkeys(model, todo_keys, p, done, cells, ctx)
        prompts = prompts_of(p.task, p.tokenizer, rulers) if p.task else {}
        todo_keys = [(c, k) for c, k in rulers if k not in done]
        if todo_keys:
            model = model or p.load()
            score_ruler(model, todo_keys, p.task, prompts, p, done, cells, ctx)
        used = [done[k] for k in planned]
        atomic_write_text(run.path / "cells.jsonl", "".join(json.dumps(r) + "\n" for r in used))
        scored = [r for r in used if "cells" in r]
        table, positions = tables(scored, s.lengths, s.windows)
        out = {"table": table, "per_position": positions}
        if s.windows >= 2:
            out["ratios"] = window_ratios(scored, s.lengths)
        if s.passkey_depths:
            trials = [r for r in used if "correct" in r]
            out["passkey"], out["passkey_trials"] = passkey_table(trials), passkey_trials(trials)
            plot_passkey(out["passkey"], run.path / f"passkey.{fmt}")
        if p.task:
            trials = [r for r in used if "all_found" in r]
            out["ruler"], out["ruler_trials"] = ruler_table(trials), ruler_trials(trials)
            write_prompts(run.path / "ruler_prompts.jsonl", prompts)
            title = f"{p.task.name}: trials with every answer found (string_match_all: ruler.csv)"
            figure = run.path / f"ruler.{fmt}"
            plot_cells(labelled_depths(out["ruler"]), figure, "all_found", "found", "needle depth", title)
        plot(positions, p.original_length, run.path / f"per_position.{fmt}")
        result = ctx.write(run, self.tables, out)
        run.update_summary(
            forward_seconds=sum(r["seconds"] for r in used),
            forwards=len(used),
            computed=len(used) - reused,
            reused=reused,
            seconds_by_scale={s: sum(r["seconds"] for r in used if r["scale"] == s) for s in [*p.scales, *p.finetuned]},
            cells=str(cells.path),
            finetuned={name: str(cells.path / "finetuned" / name) for name in p.finetuned},
        )
        return result


def passkey_plan(p: Prepared) -> list[tuple[str, int, float, int]]:
    """(scale, length, depth, trial) of every passkey cell asked for, trial by trial (a run cut
    short has as many trials in every cell, to one)."""
    s = p.settings
    return [
        (scale, n, d, t)
        for t in range(s.passkey_trials)
        for scale in p.scales
        for n in s.lengths
        for d in s.passkey_depths or []
    ]


def score_forwards(
    model: Model,
    scales: dict[str, NoScale],
    forwards: Sequence[Forward],
    p: Prepared,
    done: dict[str, dict[str, Any]],
    cells: Cells,
    ctx: RunContext,
    stage: str,
) -> None:
    """Run each forward with ``scales[f.scale]`` installed; each record goes to the store once scored."""
    s = p.settings
    longest = max(s.lengths)
    edges = bucket_edges(longest, s.buckets)
    ctx.emit("stage", stage, total=sum(f.length for f in forwards))
    tokens = 0
    for i, f in enumerate(forwards):
        ctx.emit("advance", f"{f.scale} @ {f.length} (window {f.window})", done=tokens, info=f"{i}/{len(forwards)}")
        start = time.perf_counter()
        ids = window_ids(p, f.window, f.length)
        losses = model.losses(scales[f.scale], ids, s.chunk)
        seconds = time.perf_counter() - start
        done[f.key] = {"key": f.key, **asdict(f), "seconds": seconds, "cells": {}}
        done[f.key]["cells"] = {str(n): score(losses, n, s.tail, edges) for n in f.serves}
        cells.add(done[f.key])
        for n, cell in done[f.key]["cells"].items():  # to the trackers as it goes: nats by length
            nll = cell["loss_sum"] / cell["count"]
            ctx.record(f"{stage} {f.scale} window {f.window}", {"step": int(n), "nll": nll, "ppl": math.exp(nll)})
        tokens += f.length
        ctx.emit("advance", done=tokens, info=f"{i + 1}/{len(forwards)}")


def window_ids(p: Prepared, window: int, length: int) -> torch.Tensor:
    """The ``length`` tokens window ``window`` scores: the tokenizer's start tokens (Gemma's
    ``<bos>``; none for SmolLM2), then ``tokens[window·longest:]``, so every length scores a
    prefix of the same window."""
    lead = torch.tensor(text_start(p.tokenizer), dtype=torch.long)
    offset = window * max(p.settings.lengths)
    return torch.cat([lead, p.tokens[offset : offset + length - lead.numel()]])


def score_passkeys(
    model: Model,
    todo: Sequence[tuple[tuple[str, int, float, int], str]],
    p: Prepared,
    done: dict[str, dict[str, Any]],
    cells: Cells,
    ctx: RunContext,
) -> None:
    """Each passkey trial read by greedy decoding (``Model.greedy_decode``, at most the key's
    tokens + 4) and judged by ``passkey_verdict``; its record (the prompt's layout, the decoded
    text, the verdict) goes to the store once scored."""
    ctx.emit("stage", "passkey", total=sum(c[1] for c, _ in todo))
    tokens = 0
    for i, ((scale, n, depth, trial), key) in enumerate(todo):
        ctx.emit("advance", f"passkey {scale} @ {n}, depth {depth}%", done=tokens, info=f"{i}/{len(todo)}")
        start = time.perf_counter()
        passkey = passkey_key(trial)
        prompt = passkey_prompt(p.tokenizer, n, depth, passkey)

        def decided(out: list[int]) -> bool:
            return passkey_verdict(p.tokenizer.decode(out), passkey) is not None

        out, forwards = model.greedy_decode(p.scales[scale], prompt.ids, prompt.answer, decided, prompt.answer + 4)
        decoded = p.tokenizer.decode(out)
        record = {
            "key": key,
            "scale": scale,
            "length": n,
            "depth": depth,
            "trial": trial,
            "passkey": passkey,
            "tokens": int(prompt.ids.numel()),
            "needle": prompt.needle,
            "needle_end": prompt.needle_end,
            "question": prompt.question,
            "decoded": decoded,
            "decoded_ids": out,
            "correct": bool(passkey_verdict(decoded, passkey)),
            "forwards": forwards,
        }
        done[key] = {**record, "seconds": time.perf_counter() - start}
        cells.add(done[key])
        tokens += n
        ctx.emit("advance", done=tokens, info=f"{i + 1}/{len(todo)}")


def check_finetune(settings: RealSettings, config: Any, scales: dict[str, NoScale]) -> None:
    """real.finetune_steps needs a scale to fine-tune under, and one a Hugging Face config can carry."""
    if len(scales) == 1:
        raise ConfigError(
            "real.finetune_steps fine-tunes under each scale besides the baseline none; give one, e.g. yarn"
        )
    if not family_of(config).native:
        native = ", ".join(f.model_type for f in FAMILIES.values() if f.native)
        raise ConfigError(
            f"real.finetune_steps: a fine-tuned model is saved as a Llama checkpoint; model_type "
            f"'{config.model_type}' is scored zero-shot only (fine-tuned: {native})"
        )
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    fraction = float(rope_parameters(config).get("partial_rotary_factor", 1.0))
    for name, scale in scales.items():
        try:
            llama_config_for(config, scale, int(head_dim * fraction), max(settings.lengths))
        except ConfigError as e:
            raise ConfigError(
                f"real.finetune_steps with scale '{name}': {e}; the fine-tuned model is saved as a "
                "Hugging Face checkpoint"
            ) from None


def training_windows(p: Prepared, length: int):
    """``batches(b, generator)`` for the training loop: windows of ``length`` + 1 tokens at random
    offsets in the text after the evaluated windows (never scored), inputs and next tokens."""
    region = p.tokens[p.settings.windows * max(p.settings.lengths) :]

    def batches(batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, region.numel() - length, (batch,), generator=generator)
        rows = torch.stack([region[i : i + length + 1] for i in starts.tolist()])  # (b, length + 1)
        return rows[:, :-1], rows[:, 1:]

    return batches


def finetune(model: Model, scale: NoScale, p: Prepared, folder: Path, ctx: RunContext) -> Path:
    """A copy of the model fine-tuned ``finetune_steps`` steps at the longest length with ``scale``
    installed (as PI and YaRN extend a model: AdamW, lr ``finetune_lr`` after a linear warmup of
    up to 20 steps, no weight decay, batch 1), on the model's own tokenized text after the
    evaluated windows; saved to ``folder`` as a Hugging Face checkpoint whose config carries the
    scale (``save_hf_llama``). It is written beside ``folder`` and put in place by one rename, so a
    job that fine-tunes the same copy at the same time never reads a half-written one."""
    import copy
    import shutil

    from posenc.engine.training import TrainConfig, train

    s = p.settings
    length, steps = max(s.lengths), s.finetune_steps
    model.install(scale, length)
    lm = copy.deepcopy(model.lm)  # the scale installed, the base model untouched for later forwards
    cfg = TrainConfig(
        steps=steps,
        batch_size=1,
        seq_len=length,
        lr=s.finetune_lr,
        min_lr_ratio=1.0,
        warmup_steps=min(20, steps // 5),
        weight_decay=0.0,
        log_every=1,
        eval_every=steps,
        checkpoint_every=steps,
        device=str(p.device),
        target_accuracy=None,
    )
    losses: list[float] = []
    on_log = ctx.stage(f"fine-tune {folder.name} @ {length}", steps)

    def log(record: dict[str, Any]) -> None:
        losses.append(record["train_loss"])
        on_log(record)

    result = train(lm, training_windows(p, length), cfg, seed=p.seed, on_log=log)
    partial = folder.with_name(f".{folder.name}.{os.getpid()}")
    save_hf_llama(lm.eval(), llama_config_for(p.config, scale, lm.pe.rot_dim, length), p.tokenizer, partial)
    write_json(
        partial / "finetune.json",
        {
            "steps": steps,
            "length": length,
            "lr": s.finetune_lr,
            "batch_size": 1,
            "seed": p.seed,
            "train_loss": losses,
            "seconds": result.seconds,
        },
    )
    try:
        os.rename(partial, folder)
    except OSError:  # another job put the same fine-tuned copy in place first: keep theirs
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def passkey_cell(scale: str, length: int, depth: float, trial: int) -> str:
    return f"{PASSKEY_CELLS}/{scale}/{length}/{depth}/{trial}"


PASSKEY_TRIAL_COLUMNS = [
    "scale",
    "length",
    "depth",
    "trial",
    "passkey",
    "tokens",
    "needle",
    "question",
    "decoded",
    "correct",
]


def passkey_trials(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Every passkey trial: its key, the prompt's tokens, where the needle and the question start,
    what greedy decoding wrote (a JSON string, so that whitespace and control characters show and
    the CSV keeps one line per trial) and the verdict."""
    out = pd.DataFrame(records, columns=PASSKEY_TRIAL_COLUMNS)
    out["decoded"] = [json.dumps(text, ensure_ascii=False) for text in out.decoded]
    return out


def passkey_table(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Exact-match accuracy by scale, length and depth: keys found of ``trials``, their mean, its
    95% Wilson interval, and chance (a uniform guess of a five-digit key)."""
    rows = []
    for (scale, n, depth), part in pd.DataFrame(records).groupby(["scale", "length", "depth"], sort=False):
        found, trials = int(part.correct.sum()), len(part)
        low, high = wilson_interval(found, trials)
        rows.append(
            {
                "scale": scale,
                "length": n,
                "depth": depth,
                "accuracy": found / trials,
                "ci95_low": low,
                "ci95_high": high,
                "correct": found,
                "trials": trials,
                "chance": PASSKEY_CHANCE,
            }
        )
    return pd.DataFrame(rows)


def plot_passkey(accuracy: pd.DataFrame, path: Path) -> Path:
    """One length × depth heatmap of passkey exact match per scale, each cell labelled keys found
    of trials (chance, a uniform guess of the key, is 1/90000: 0 on this scale)."""
    title = "passkey exact match (keys found / trials; chance 1/90000)"
    return plot_cells(accuracy, path, "accuracy", "correct", "key depth", title, unit="%")


def plot_cells(
    table: pd.DataFrame, path: Path, value: str, found: str, ylabel: str, title: str, unit: str = ""
) -> Path:
    """One length × depth heatmap of ``value`` (a rate in [0, 1]) per scale, each cell labelled
    ``found`` of ``trials``; a depth is a number in ``unit`` (passkey: %) or a label."""
    plt = pyplot()

    scales = list(dict.fromkeys(table.scale))
    fig, axes = plt.subplots(1, len(scales), figsize=(1.5 + 3 * len(scales), 3.4), squeeze=False)
    for ax, scale in zip(axes[0], scales):
        part = table[table.scale == scale]
        grid = part.pivot(index="depth", columns="length", values=value)
        hits = part.pivot(index="depth", columns="length", values=found)
        trials = part.pivot(index="depth", columns="length", values="trials")
        ax.imshow(grid.values, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto", origin="lower")
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                if not pd.isna(hits.values[i, j]):
                    ax.text(j, i, f"{hits.values[i, j]:.0f}/{trials.values[i, j]:.0f}", ha="center", va="center")
        ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns], rotation=45)
        ax.set_yticks(range(grid.shape[0]), [d if isinstance(d, str) else f"{d:g}{unit}" for d in grid.index])
        ax.set_title(scale)
        ax.set_xlabel("length (tokens)")
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(title)
    return save_figure(fig, path, tight=True)


def tables(records: Any, lengths: Sequence[int], windows: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The scale × metric × length table (ppl, tail_ppl) and the loss by position bucket."""
    sums: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        for n, c in r["cells"].items():
            acc = sums.setdefault(
                (r["scale"], int(n)),
                {"loss": 0.0, "count": 0, "tail": 0.0, "tail_count": 0, "buckets": {}, "windows": 0},
            )
            acc["loss"] += c["loss_sum"]
            acc["count"] += c["count"]
            acc["tail"] += c["tail_sum"]
            acc["tail_count"] += c["tail_count"]
            acc["windows"] += 1
            for i, (b, k) in enumerate(zip(c["bucket_sums"], c["bucket_counts"])):
                s, m = acc["buckets"].get(i, (0.0, 0))
                acc["buckets"][i] = (s + b, m + k)
    scales = list(dict.fromkeys(scale for scale, _ in sums))
    rows = []
    for scale in scales:
        for metric, total, count in (("ppl", "loss", "count"), ("tail_ppl", "tail", "tail_count")):
            row: dict[str, Any] = {"scale": scale, "metric": metric}
            for n in lengths:
                acc = sums.get((scale, n))
                row[str(n)] = math.exp(acc[total] / acc[count]) if acc else float("nan")
            rows.append(row)
    edges_rows = []
    for (scale, n), acc in sums.items():
        start = 0
        for i in sorted(acc["buckets"]):
            s, m = acc["buckets"][i]
            edges_rows.append(
                {"scale": scale, "length": n, "start": start, "end": start + m // acc["windows"], "loss": s / m}
            )
            start += m // acc["windows"]
    return pd.DataFrame(rows), pd.DataFrame(edges_rows)


def window_ratios(records: Any, lengths: Sequence[int], level: float = 0.95) -> pd.DataFrame:
    """Each pair of scales (a listed before b) at each length: the ratio of their perplexities
    (whole window, and its tail) as the exp of the mean over windows of a's mean token loss minus
    b's, with the ``level`` t interval of that mean over windows (paired by window: both scales
    read the same tokens), exponentiated, so it stays positive."""
    losses: dict[tuple[str, str, int], dict[int, float]] = {}  # (scale, metric, length) -> {window: loss}
    for r in records:
        for n, c in r["cells"].items():
            losses.setdefault((r["scale"], "ppl", int(n)), {})[r["window"]] = c["loss_sum"] / c["count"]
            losses.setdefault((r["scale"], "tail_ppl", int(n)), {})[r["window"]] = c["tail_sum"] / c["tail_count"]
    scales = list(dict.fromkeys(r["scale"] for r in records))
    rows = []
    for i, a in enumerate(scales):
        for b in scales[i + 1 :]:
            for metric in ("ppl", "tail_ppl"):
                for n in lengths:
                    d = paired_difference(losses.get((a, metric, n), {}), losses.get((b, metric, n), {}), level)
                    if d["n"]:
                        rows.append(
                            {
                                "a": a,
                                "b": b,
                                "metric": metric,
                                "length": n,
                                "ratio": math.exp(d["mean_diff"]),
                                "ci95_low": math.exp(d["ci95_low"]),
                                "ci95_high": math.exp(d["ci95_high"]),
                                "windows": d["n"],
                            }
                        )
    return pd.DataFrame(rows, columns=["a", "b", "metric", "length", "ratio", "ci95_low", "ci95_high", "windows"])


def plot(positions: pd.DataFrame, original: int, path: Path) -> Path:
    """Mean loss by position bucket at the longest length, one line per scale."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4.5))
    longest = positions.length.max()
    for scale, part in positions[positions.length == longest].groupby("scale", sort=False):
        ax.plot((part.start + part.end) / 2, part.loss, marker=".", label=scale)
    ax.axvline(original, color="grey", linestyle=":", label=f"original context {original}")
    ax.set_xlabel("position in window (tokens)")
    ax.set_ylabel("mean loss (nats)")
    ax.set_title(f"loss by position, windows of {longest} tokens")
    ax.legend()
    return save_figure(fig, path)
