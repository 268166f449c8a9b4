"""The benchmark cases. Each returns rows of one table:

``benchmark, case, posenc, reference, unit, ratio, goal, met`` where ``ratio`` is posenc over the
reference in the sense that ``goal`` states (throughput: higher is better; time: lower is better).
Training rows add ``ratio_low, ratio_high``: the 95% interval of their median ratio.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.utils.benchmark as tb

from posenc.analysis.stats import median_interval
from posenc.models.blocked import BLOCK_QUERIES


@dataclass
class Sizes:
    """Shapes and timings of a run; ``quick()`` shrinks everything so the suite runs in seconds.

    Training throughput is timed in ``rounds`` alternating blocks of at least ``block_time``
    seconds each (``interleaved``), on the wall clock or, with ``cpu_clock``, on this process's
    CPU time (``time.process_time``: time slices taken by other jobs on a shared machine do not
    count; at one thread it equals the wall clock of an idle machine). One step of lm_tiny takes
    0.2–0.5 s, so a block holds a few consecutive steps, as in training. With 9 rounds of one
    step each the same pair (FIRE vs NoPE, one thread) read anywhere from 0.85 to 0.94 across
    runs; with 15 rounds of ~1 s the 95% interval of the median reaches 2–10% either side of it
    on the project's 2-core machine. RoPE's application is timed the same way, in blocks of half
    ``block_time``. The other cases take ``min_run_time`` per measurement, on the wall clock.
    """

    batch: int = 32
    seq_len: int = 128
    rope_shape: tuple[int, int, int, int] = (8, 4, 2048, 64)
    long_lengths: tuple[int, ...] = (4096, 16384)
    min_run_time: float = 2.0
    startup_repeats: int = 5
    repeats: int = 3
    vit_resolutions: tuple[int, ...] = (32, 64)
    vit_batch: int = 32
    rounds: int = 15
    block_time: float = 1.0
    cpu_clock: bool = False
    real_lengths: tuple[int, ...] = (4096,)
    real_layers: int = 30
    real_model: str | None = None
    real_vocab: int | None = None  # the family rows' vocabulary (None: each model's own)
    precision_steps: int = 200  # the short run of each precision (``train_precision``)
    precision_windows: int = 64  # the validation windows that score it
    suite_sweeps: str | None = None  # the standard suite's sweeps the start-up rows plan (None: all)
    matmul_n: int = 4096  # the (n, n) matmul whose rate a forward is read against
    # rounds of the cases timed a call or a process at a time (long and bf16 forwards, suite
    # start-up): 6 is the fewest whose median has a 95% interval (``median_interval``: the
    # smallest and the largest of the 6, 96.9%)
    interval_rounds: int = 6

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            batch=2,
            seq_len=16,
            rope_shape=(1, 2, 64, 16),
            long_lengths=(64,),
            min_run_time=0.05,
            startup_repeats=1,
            repeats=1,
            vit_resolutions=(16, 24),
            vit_batch=2,
            rounds=6,
            block_time=0.0,
            real_lengths=(64,),
            real_layers=2,
            real_vocab=512,
            precision_steps=4,
            precision_windows=4,
            suite_sweeps="extrapolation_target",
            matmul_n=256,  # a 4096² bf16 matmul takes minutes on a CPU without bf16 matrix units
        )


def row(
    benchmark: str,
    case: str,
    ours: float,
    reference: float,
    unit: str,
    goal: str,
    higher_is_better: bool,
    target: float,
) -> dict[str, Any]:
    ratio = ours / reference
    met = ratio >= target if higher_is_better else ratio <= target
    return {
        "benchmark": benchmark,
        "case": case,
        "posenc": ours,
        "reference": reference,
        "unit": unit,
        "ratio": ratio,
        "goal": goal,
        "met": bool(met),
    }


def _median(stmt: str, env: dict[str, Any], threads: int, min_run_time: float) -> float:
    timer = tb.Timer(stmt, globals=env, num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def environment(threads: int) -> dict[str, str]:
    """What the figures were measured on. The ratios depend on the CPU, not only on the code: the
    training ratios of the bias schemes against NoPE read 0.90–0.92 on one machine of this
    workplace and 0.93–0.96 on another (one thread, the same commit), so a table is read with its
    CPU model, the ISA torch's kernels were built for (``cpu_capability``) and the cores."""
    return {
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": str(threads),
    }


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name from ``cpuinfo`` (Linux), with its x86 family and model numbers where
    given (a cloud machine may name itself only "AMD EPYC": two such machines here ran a 4096²
    bf16 matmul at 360 and 199 GFLOP/s a thread), else what ``platform.processor()`` says."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if not line.strip():  # the first processor's block ends
                    break
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "model name" not in fields:
        return platform.processor() or platform.machine()
    ids = [f"{name} {fields[key]}" for key, name in (("cpu family", "family"), ("model", "model")) if key in fields]
    return f"{fields['model name']} ({', '.join(ids)})" if ids else fields["model name"]


# --- training throughput -------------------------------------------------------------------


def _lm(pe_name: str, extra: list[str] | None = None):
    from posenc.engine.build import build
    from posenc.engine.config import compose

    return build(compose([f"pe={pe_name}", *(extra or [])])).model


def _hf_llama(model):
    from transformers import LlamaConfig, LlamaForCausalLM

    block = model.blocks[0]
    config = LlamaConfig(
        vocab_size=model.vocab_size,
        hidden_size=model.d_model,
        intermediate_size=block.mlp.gate.out_features,
        num_hidden_layers=len(model.blocks),
        num_attention_heads=model.n_heads,
        num_key_value_heads=block.attn.n_kv_heads,
        head_dim=model.head_dim,
        tie_word_embeddings=True,
        rms_norm_eps=block.attn_norm.eps,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config)


def _train_step(model, forward, batch: int, seq_len: int, vocab: int) -> Callable[[], None]:
    """One AdamW step of next-token-style cross-entropy on a fixed random batch."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, vocab, (batch, seq_len))

    def step() -> None:
        logits = forward(x)  # (b, s, V)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), x.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


class Timing(NamedTuple):
    """Seconds per call of posenc and of its reference, the median of the per-round ratios
    reference / posenc (> 1: posenc is faster), and those ratios in round order."""

    ours: float
    reference: float
    ratio: float
    ratios: list[float]


def interleaved(
    ours: Callable[[], None],
    reference: Callable[[], None],
    threads: int,
    rounds: int,
    block_time: float,
    warmup: int = 2,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """``ours`` and ``reference`` timed alternately in this process (``Timing``).

    After ``warmup`` calls of each, every round times one block of calls of each, enough calls for
    ``block_time`` seconds; the order flips every round (A B, B A, A B, …) so a drift in machine
    speed (another process, turbo, thermal) falls on both alike. The per-round ratio compares two
    blocks measured back to back, which is far less noisy than two medians taken minutes apart.
    """
    torch.set_num_threads(threads)
    fns = (ours, reference)

    def block(i: int, calls: int) -> float:
        start = clock()
        for _ in range(calls):
            fns[i]()
        return (clock() - start) / calls

    for _ in range(warmup):
        ours()
        reference()
    calls = [max(1, math.ceil(block_time / block(i, 1))) for i in (0, 1)]
    times: list[list[float]] = [[], []]
    for r in range(rounds):
        for i in (0, 1) if r % 2 == 0 else (1, 0):
            times[i].append(block(i, calls[i]))
    ratios = [ref / our for our, ref in zip(*times)]
    return Timing(statistics.median(times[0]), statistics.median(times[1]), statistics.median(ratios), ratios)


def _sized_interleaved(
    ours: Callable[[], Any], reference: Callable[[], Any], sizes: Sizes, threads: int, block_time: float
) -> Timing:
    """``interleaved`` over ``sizes.rounds`` rounds on the clock ``sizes`` asks for."""
    clock = time.process_time if sizes.cpu_clock else time.perf_counter
    return interleaved(ours, reference, threads, sizes.rounds, block_time, clock=clock)


def _throughput_row(
    case: str,
    ours: Callable[[], None],
    reference: Callable[[], None],
    tokens: int,
    sizes: Sizes,
    threads: int,
    goal: float,
    benchmark: str = "train throughput",
) -> dict[str, Any]:
    timing = _sized_interleaved(ours, reference, sizes, threads, sizes.block_time)
    r = row(benchmark, case, tokens / timing.ours, tokens / timing.reference, "tokens/s", f">= {goal}", True, goal)
    r["ratio"], r["met"] = timing.ratio, bool(timing.ratio >= goal)  # the median of per-round ratios, not of medians
    r["ratio_low"], r["ratio_high"] = median_interval(timing.ratios)
    return r


# a position scheme's training step against NoPE's, as tokens/s (issue 30: at least 0.95, with
# the row's interval above it)
SCHEME_STEP_GOAL = 0.95


def train_throughput(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """Tokens/s of a training step: posenc LM with RoPE vs transformers' Llama of the same shape,
    then every 1D scheme of the config tree vs NoPE at the same shape, each pair interleaved
    (``interleaved``): posenc and reference columns are medians of each, ratio the median of the
    per-round ratios."""
    from posenc.engine.config import options_where

    torch.set_num_threads(threads)
    b, s = sizes.batch, sizes.seq_len
    tokens = b * s
    extra = [f"train.seq_len={s}"]
    ours = _lm("rope", extra)
    hf = _hf_llama(ours)
    rows = [
        _throughput_row(
            "lm_tiny rope vs HF LlamaForCausalLM",
            _train_step(ours, ours, b, s, ours.vocab_size),
            _train_step(hf, lambda x: hf(x).logits, b, s, ours.vocab_size),
            tokens,
            sizes,
            threads,
            1.0,
        )
    ]
    nope = _lm("nope", extra)
    nope_step = _train_step(nope, nope, b, s, nope.vocab_size)
    for name in options_where("pe", lambda c: c.ndim == 1 and c.encodes != "nothing"):
        model = _lm(name, extra)
        rows.append(
            _throughput_row(
                f"{name} vs nope",
                _train_step(model, model, b, s, model.vocab_size),
                nope_step,
                tokens,
                sizes,
                threads,
                SCHEME_STEP_GOAL,
            )
        )
    return rows


# bf16 against float32 after the same short run: relative difference of validation bits per byte
PRECISION_TOLERANCE = 0.02


def train_precision(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """lm_tiny (RoPE) trained in bf16 autocast (``train.precision=bf16``: matmuls and attention in
    bf16, positions, angles, norms and losses in float32) against float32: tokens/s of the training
    step, the two interleaved (``interleaved``); then a short run of ``sizes.precision_steps`` steps
    of the training loop in each precision from the same initialisation and batches, its validation
    bits per byte (``sizes.precision_windows`` windows, scored in float32 as the loop validates),
    goal within ``PRECISION_TOLERANCE`` of float32's. bf16 keeps float32's exponent range, so the
    run needs no loss scaling (Kalamkar et al. 2019, "A Study of BFLOAT16 for Deep Learning
    Training")."""
    from posenc.engine.build import build
    from posenc.engine.config import compose
    from posenc.engine.evaluation import evaluate
    from posenc.engine.training import autocast, train

    torch.set_num_threads(threads)
    b, s = sizes.batch, sizes.seq_len
    overrides = ["pe=rope", f"train.seq_len={s}", f"train.batch_size={b}", f"train.steps={sizes.precision_steps}"]
    cpu = torch.device("cpu")
    steps = {}
    for precision in ("bf16", "fp32"):
        model = _lm("rope", overrides)

        def forward(x: torch.Tensor, model=model, precision=precision) -> torch.Tensor:
            with autocast(cpu, precision):
                return model(x)

        steps[precision] = _train_step(model, forward, b, s, model.vocab_size)
    rows = [
        _throughput_row(
            "lm_tiny rope bf16 vs fp32", steps["bf16"], steps["fp32"], b * s, sizes, threads, 1.0, "train precision"
        )
    ]
    bits = {}
    for precision in ("bf16", "fp32"):  # the same seed: the same initial weights and batches
        setup = build(compose([*overrides, f"train.precision={precision}", "train.device=cpu"]))
        task, size = setup.task, setup.task.input_size(s)
        batches = lambda n, g, task=task, size=size: task.train_batch(n, size, g)  # noqa: E731
        train(setup.model, batches, setup.train, seed=setup.seed)
        windows = task.eval_set(size, sizes.precision_windows, "val")
        bits[precision] = float(evaluate(setup.model, *windows, batch_size=setup.eval.batch_size)["bits"])
    ratio = bits["bf16"] / bits["fp32"]
    rows.append(
        {
            "benchmark": "train precision",
            "case": f"lm_tiny rope bf16 vs fp32 val bits/byte after {sizes.precision_steps} steps",
            "posenc": bits["bf16"],
            "reference": bits["fp32"],
            "unit": "bits/byte",
            "ratio": ratio,
            "goal": f"|ratio - 1| <= {PRECISION_TOLERANCE:g}",
            "met": abs(ratio - 1) <= PRECISION_TOLERANCE,
        }
    )
    return rows


def _time_row(
    benchmark: str,
    case: str,
    ours: Callable[[], Any],
    reference: Callable[[], Any],
    sizes: Sizes,
    threads: int,
    goal: str,
    target: float,
) -> dict[str, Any]:
    """posenc's time over the reference's (lower is better), timed ``interleaved``: the median of
    the per-round ratios and its 95% interval."""
    timing = _sized_interleaved(ours, reference, sizes, threads, sizes.block_time / 2)
    return _inverted(row(benchmark, case, timing.ours, timing.reference, "s", goal, False, target), timing, target)


def _inverted(r: dict[str, Any], timing: Timing, target: float) -> dict[str, Any]:
    """A time row ``r`` (lower is better) given the median of ``timing``'s per-round ratios as
    posenc's time over the reference's, with its 95% interval (NaN under 6 rounds)."""
    r["ratio"], r["met"] = 1 / timing.ratio, bool(1 / timing.ratio <= target)
    low, high = median_interval(timing.ratios)
    r["ratio_low"], r["ratio_high"] = 1 / high, 1 / low
    return r


# --- RoPE application ----------------------------------------------------------------------


def rope_apply(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """posenc ``RoPE.rotate_qk`` vs transformers' ``apply_rotary_pos_emb``, forward and
    forward + backward, with cos/sin computed beforehand for both."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from posenc.pe.rope import RoPE

    b, h, s, d = sizes.rope_shape
    q = torch.randn(b, h, s, d, requires_grad=True)
    k = torch.randn(b, h, s, d, requires_grad=True)
    grad = torch.randn(b, h, s, d)
    rope = RoPE(d)
    rotation = rope.rotation(torch.arange(s), q.dtype)
    cos, sin = (torch.cat((t, t), dim=-1)[None] for t in rotation)  # HF's (1, s, d) tables
    ours_q, _ = rope.rotate_qk(q, k, rotation)
    ref_q, _ = apply_rotary_pos_emb(q, k, cos, sin)
    err = float((ours_q - ref_q).detach().abs().max())
    # interleaved, not one Timer after the other: these calls are a few ms of 8 MB tensors, and
    # how fast the allocator hands out fresh pages drifts within a process (the same two calls read
    # 1.67x and 0.64x timed one after the other and interleaved)
    shape = "x".join(map(str, sizes.rope_shape))
    rows = [
        _time_row(
            "rope apply",
            f"forward {shape}",
            lambda: rope.rotate_qk(q, k, rotation),
            lambda: apply_rotary_pos_emb(q, k, cos, sin),
            sizes,
            threads,
            "<= 1.0 (stretch 0.4)",
            1.0,
        ),
        _time_row(
            "rope apply",
            f"forward+backward {shape}",
            lambda: torch.autograd.backward(rope.rotate_qk(q, k, rotation), (grad, grad)),
            lambda: torch.autograd.backward(apply_rotary_pos_emb(q, k, cos, sin), (grad, grad)),
            sizes,
            threads,
            "<= 1.0 (stretch 0.4)",
            1.0,
        ),
    ]
    rows.append(
        {
            "benchmark": "rope apply",
            "case": "max |posenc - HF|",
            "posenc": err,
            "reference": 0.0,
            "unit": "abs",
            "ratio": float("nan"),
            "goal": "<= 1e-5",
            "met": err <= 1e-5,
        }
    )
    return rows


# --- long-context evaluation ---------------------------------------------------------------

# one process per scheme for its peak RSS: the process's own high-water mark, Python and torch included
_LONG_EVAL = """
import json, sys, torch
torch.set_num_threads({threads})
from posenc.benchmarks.suite import long_model
model = long_model({name!r}, {length})
x = torch.randint(0, 256, (1, {length}))
with torch.no_grad():
    model(x[:, :64])
    model(x)
# VmHWM is this process's own peak (Linux): ru_maxrss would keep the peak of the forked parent
try:
    peak = 1024 * next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except OSError:  # no /proc (macOS): ru_maxrss, in bytes there
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"peak_rss": peak}}))
"""


def long_model(name: str, length: int) -> torch.nn.Module:
    """``lm_tiny`` with scheme ``name``, sized for ``length`` tokens, in eval mode."""
    from posenc.engine.build import build
    from posenc.engine.config import compose

    return build(compose([f"pe={name}", f"train.seq_len={length}"])).model.eval()


def _long_peak(name: str, length: int, threads: int) -> float | str:
    """Peak RSS in bytes of a fresh process that runs one forward of ``length`` tokens, or its error."""
    code = _LONG_EVAL.format(name=name, length=length, threads=threads)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode:
        return (out.stderr.strip().splitlines() or ["failed"])[-1]
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss"])


def long_eval(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """Forward pass of lm_tiny at long lengths (batch 1) per 1D scheme against NoPE (plain causal
    SDPA, no bias): time in this process, the two interleaved (``interleaved``, one forward a
    block, ``sizes.interval_rounds`` rounds, the median of per-round ratios and its interval), goal
    2x; peak RSS of a fresh process for each, goal 1.5x and under 4 GiB."""
    from posenc.engine.config import options_where

    rows = []
    gib = 2**30
    for length in sizes.long_lengths:
        x = torch.randint(0, 256, (1, length))
        nope = long_model("nope", length)
        base_peak = _long_peak("nope", length, threads)
        if isinstance(base_peak, str):
            raise RuntimeError(f"NoPE evaluation at {length} failed: {base_peak}")
        for name in options_where("pe", lambda c: c.ndim == 1):
            if name == "nope":
                continue
            peak = _long_peak(name, length, threads)
            if isinstance(peak, str):
                rows.append(
                    {
                        "benchmark": "long eval",
                        "case": f"{name} @ {length}",
                        "posenc": float("nan"),
                        "reference": float("nan"),
                        "unit": "s",
                        "ratio": float("nan"),
                        "goal": peak,
                        "met": False,
                    }
                )
                continue
            model = long_model(name, length)
            with torch.no_grad():
                timing = interleaved(lambda: model(x), lambda: nope(x), threads, sizes.interval_rounds, 0.0, warmup=1)
            r = row(
                "long eval", f"{name} @ {length} time vs nope", timing.ours, timing.reference, "s", "<= 2.0", False, 2.0
            )
            rows.append(_inverted(r, timing, 2.0))
            rows.append(
                {
                    "benchmark": "long eval",
                    "case": f"{name} @ {length} peak RSS vs nope",
                    "posenc": peak / gib,
                    "reference": base_peak / gib,
                    "unit": "GiB",
                    "ratio": peak / base_peak,
                    "goal": "<= 1.5 and <= 4 GiB",
                    "met": peak / base_peak <= 1.5 and peak <= 4 * gib,
                }
            )
    return rows


# --- real model forward vs transformers -----------------------------------------------------

# SmolLM2-135M's shapes (the model of results/real/), so the case needs no download
SMOLLM2_SHAPES = dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    head_dim=64,
    rope_theta=100000.0,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
    rms_norm_eps=1e-5,
)


def _rss_peak(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and how many bytes this process's RSS rose above its level before the call (Linux:
    freed heap returned with ``malloc_trim``, the high-water mark reset through ``clear_refs``);
    NaN where /proc cannot do that."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
        before = _proc_status("VmRSS")
    except OSError:
        return fn(), float("nan")
    out = fn()
    return out, float(_proc_status("VmHWM") - before)


def _proc_status(key: str) -> int:
    with open("/proc/self/status") as f:
        return 1024 * next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def _real_reference(sizes: Sizes):
    """transformers' Llama in float32 with SDPA: ``sizes.real_model`` (a folder or .gguf file), else
    a random one of SmolLM2-135M's shapes with ``sizes.real_layers`` layers."""
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    if sizes.real_model:
        from posenc.models import pretrained

        source = pretrained.resolve_source(sizes.real_model)
        model = AutoModelForCausalLM.from_pretrained(
            source.path, dtype=torch.float32, attn_implementation="sdpa", **source.model_kwargs()
        )
        return model.eval(), source.name
    torch.manual_seed(0)
    config = LlamaConfig(**{**SMOLLM2_SHAPES, "num_hidden_layers": sizes.real_layers}, attn_implementation="sdpa")
    return LlamaForCausalLM(config).eval(), f"SmolLM2 shapes, {sizes.real_layers} layers, random"


def real_forward(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """posenc's forward of an imported Llama (``from_hf_llama``) against transformers' own forward of
    the same model, float32, same threads, batch 1, per length (``_forward_rows``)."""
    from posenc.models import from_hf_llama

    torch.set_num_threads(threads)
    hf, name = _real_reference(sizes)
    ours = from_hf_llama(hf).eval()  # the same tensors: no second copy of the weights
    return _forward_rows("real forward", name, ours, lambda ids: hf(ids).logits, hf.config.vocab_size, sizes, threads)


def real_decode(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """One greedy step after a cached context (a RULER or passkey answer's tokens past the first
    that departs from the reference): posenc's (``CausalLM.kv_cache``) against transformers' own
    (``DynamicCache``), the same Llama in float32, batch 1, a context of each length of
    ``sizes.real_lengths`` (``_decode_rows``)."""
    from posenc.models import from_hf_llama

    torch.set_num_threads(threads)
    hf, name = _real_reference(sizes)
    key = _cache_keyword(hf)

    def reference(ids: torch.Tensor, cache: Any) -> torch.Tensor:
        return hf(ids, **{key: cache}, use_cache=True, logits_to_keep=1).logits[0, -1]

    return _decode_rows("real decode", name, from_hf_llama(hf).eval(), hf, reference, sizes, threads)


def _cache_keyword(hf: Any) -> str:
    """The forward's name for its cache: transformers 5.25 renamed ``past_key_values`` to ``cache``
    (the old name warns)."""
    return "cache" if "cache" in inspect.signature(hf.forward).parameters else "past_key_values"


def _decode_rows(
    benchmark: str,
    name: str,
    ours: Any,
    hf: Any,
    reference: Callable[[torch.Tensor, Any], torch.Tensor],
    sizes: Sizes,
    threads: int,
) -> list[dict[str, Any]]:
    """For each length of ``sizes.real_lengths``: a random context fills posenc's cache
    (``ours.kv_cache()``) and transformers' ``DynamicCache`` (``reference(ids, cache)``: its forward's
    last logits), then one more token is timed on each, interleaved in this process. Every step
    starts from the same cache: posenc's is cut back to the context, and transformers' layers get
    back the tensors they held before it (a sliding-window layer cannot be cropped past its window).
    Rows: the step's time, and the largest difference of its logits."""
    from transformers import DynamicCache

    rows = []
    for length in sizes.real_lengths:
        ids = torch.randint(0, hf.config.vocab_size, (1, length + 1))
        context, token = ids[:, :-1], ids[:, -1:]
        with torch.no_grad():
            cache, ref_cache = ours.kv_cache(), DynamicCache(config=hf.config)
            ours(context, cache=cache, last=1)
            reference(context, ref_cache)
        held = [(layer.keys, layer.values, vars(layer).get("cumulative_length")) for layer in ref_cache.layers]
        out: list[torch.Tensor] = [torch.empty(0), torch.empty(0)]

        def step_ours(cache=cache, token=token, length=length) -> None:
            with torch.no_grad():
                out[0] = ours(token, cache=cache, last=1)[0, -1]
            cache.truncate(length)

        def step_ref(ref_cache=ref_cache, token=token, held=held) -> None:
            with torch.no_grad():
                out[1] = reference(token, ref_cache)
            for layer, (keys, values, seen) in zip(ref_cache.layers, held):
                layer.keys, layer.values = keys, values
                if seen is not None:
                    layer.cumulative_length = seen

        t_ours, t_ref, speedup, _ = interleaved(step_ours, step_ref, threads, sizes.repeats, sizes.min_run_time / 4)
        case = f"{name}: a token after {length} cached,"
        r = row(benchmark, f"{case} time", t_ours, t_ref, "s", "<= 1.0", False, 1.0)
        r["ratio"], r["met"] = 1 / speedup, bool(1 / speedup <= 1.0)  # the median of per-round ratios
        rows += [r, difference_row(benchmark, f"{case} max |posenc - HF|", out[0], out[1])]
    return rows


def difference_row(benchmark: str, case: str, ours: torch.Tensor, reference: torch.Tensor) -> dict[str, Any]:
    """The row of ``case``: the largest |posenc − transformers| of two outputs, against the goal 1e-3."""
    err = float((ours - reference).abs().max())
    return {
        "benchmark": benchmark,
        "case": case,
        "posenc": err,
        "reference": 0.0,
        "unit": "abs",
        "ratio": float("nan"),
        "goal": "<= 1e-3",
        "met": err <= 1e-3,
    }


def _forward_rows(
    benchmark: str,
    name: str,
    ours: torch.nn.Module,
    reference: Callable[[torch.Tensor], torch.Tensor],
    vocab: int,
    sizes: Sizes,
    threads: int,
) -> list[dict[str, Any]]:
    """posenc's forward ``ours`` against transformers' ``reference`` (ids -> logits) of the same
    model per length of ``sizes.real_lengths``: the logits, then the token losses (``posenc
    extrapolate``'s pass: posenc's head and loss run 1024 positions at a time; transformers gives
    the full logits, then their cross-entropy). Each pair is timed interleaved (``interleaved``, one
    call per block) in this process; memory is the rise of RSS over its level before each call
    (``_rss_peak``), the median over calls."""
    import torch.nn.functional as F

    gib, rows = 2**30, []
    for length in sizes.real_lengths:
        x = torch.randint(0, vocab, (1, length + 1))
        ids, targets = x[:, :-1], x[:, 1:]
        pairs = {
            "logits": (lambda: ours(ids), lambda: reference(ids)),
            "token losses": (
                lambda: ours(ids, targets=targets, chunk=1024),
                lambda: F.cross_entropy(reference(ids)[0], targets[0], reduction="none")[None],
            ),
        }
        for what, (run_ours, run_ref) in pairs.items():
            peaks: list[list[float]] = [[], []]
            tails: list[torch.Tensor] = [torch.empty(0), torch.empty(0)]

            def measured(i: int, fn: Callable[[], torch.Tensor]) -> Callable[[], None]:
                def call() -> None:
                    with torch.no_grad():
                        out, peak = _rss_peak(fn)
                    peaks[i].append(peak)
                    tails[i] = out[0, -64:].clone()  # kept small: a held output would count in the next peak

                return call

            t_ours, t_ref, speedup, _ = interleaved(
                measured(0, run_ours), measured(1, run_ref), threads, sizes.repeats, 0.0, warmup=0
            )
            case = f"{name}: {what} @ {length}"
            r = row(benchmark, f"{case} time", t_ours, t_ref, "s", "<= 1.0", False, 1.0)
            r["ratio"], r["met"] = 1 / speedup, bool(1 / speedup <= 1.0)  # the median of per-round ratios
            rows.append(r)
            mem = [statistics.median(p) / gib for p in peaks]
            rows.append(row(benchmark, f"{case} peak memory", mem[0], mem[1], "GiB", "<= 1.0", False, 1.0))
            rows.append(difference_row(benchmark, f"{case} max |posenc - HF|", tails[0], tails[1]))
    return rows


# Random models of three families' real shapes (their published configs), ``sizes.real_layers`` layers
FAMILY_SHAPES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", "SmolLM2-135M", SMOLLM2_SHAPES),
    "qwen2": (
        "Qwen2Config",
        "Qwen2.5-0.5B",
        dict(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            max_position_embeddings=32768,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
        ),
    ),
    "gemma3_text": (
        "Gemma3TextConfig",
        "Gemma 3 270M",
        dict(
            vocab_size=262144,
            hidden_size=640,
            intermediate_size=2048,
            num_hidden_layers=18,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            query_pre_attn_scalar=256,
            sliding_window=512,
            max_position_embeddings=32768,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
            },
            tie_word_embeddings=True,
            layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)],
        ),
    ),
}


def _family_reference(family: str, sizes: Sizes):
    """transformers' model of ``family``'s shapes in float32 with SDPA, random weights, at most
    ``sizes.real_layers`` layers and, with ``sizes.real_vocab``, that vocabulary."""
    import transformers

    config_name, label, shapes = FAMILY_SHAPES[family]
    layers = min(sizes.real_layers, shapes["num_hidden_layers"])
    kwargs = {**shapes, "num_hidden_layers": layers, "vocab_size": sizes.real_vocab or shapes["vocab_size"]}
    if "layer_types" in shapes:  # the first layers' types (Gemma 3: five local layers to one global)
        kwargs["layer_types"] = shapes["layer_types"][:layers]
    config = getattr(transformers, config_name)(**kwargs, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    return model, f"{label} shapes, {layers} layers, random"


def family_forward(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """Every family of ``FAMILY_SHAPES`` as posenc loads it (``Family.convert``: Llama into posenc's
    own LM, the others as transformers' modules with posenc's RoPE, banded attention and head)
    against transformers' own forward of the same weights, its own rotary embedding and SDPA
    attention put back for each of its calls (``_forward_rows``)."""
    torch.set_num_threads(threads)
    rows = []
    for family in FAMILY_SHAPES:
        hf, name = _family_reference(family, sizes)
        ours, as_transformers = _converted(family, hf)

        def reference(ids: torch.Tensor, hf=hf, as_transformers=as_transformers) -> torch.Tensor:
            with as_transformers():
                return hf(ids).logits

        rows += _forward_rows("family forward", name, ours, reference, hf.config.vocab_size, sizes, threads)
        del hf, ours
    return rows


def _converted(family: str, hf: Any) -> tuple[Any, Callable[[], contextlib.AbstractContextManager]]:
    """posenc's model of ``hf`` (``Family.convert``: the same tensors; Llama into posenc's own LM,
    the others take over transformers' rotary and attention), and a context in which ``hf`` runs
    transformers' own rotary embedding and attention again, for a reference call."""
    from posenc.models.families import FAMILIES

    base = hf.base_model
    theirs = base.rotary_emb, hf.config._attn_implementation
    ours = FAMILIES[family].convert(hf).eval()
    mine = base.rotary_emb, hf.config._attn_implementation

    @contextlib.contextmanager
    def as_transformers() -> Iterator[None]:
        base.rotary_emb = theirs[0]
        hf.set_attn_implementation(theirs[1])
        try:
            yield
        finally:
            base.rotary_emb = mine[0]
            hf.set_attn_implementation(mine[1])

    return ours, as_transformers


def family_decode(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """``real_decode`` for the families that run transformers' own modules (``FAMILY_SHAPES`` but
    Llama, which ``real_decode`` covers): posenc's cache (``InjectedLM.kv_cache``) against
    transformers' ``DynamicCache``, its own rotary embedding and SDPA put back for each of its
    calls, as ``family_forward`` does (``_decode_rows``)."""
    torch.set_num_threads(threads)
    rows = []
    for family in [f for f in FAMILY_SHAPES if f != "llama"]:
        hf, name = _family_reference(family, sizes)
        key = _cache_keyword(hf)
        ours, as_transformers = _converted(family, hf)

        def reference(ids: torch.Tensor, cache: Any, hf=hf, key=key, as_transformers=as_transformers) -> torch.Tensor:
            with as_transformers():
                return hf(ids, **{key: cache}, use_cache=True, logits_to_keep=1).logits[0, -1]

        rows += _decode_rows("family decode", name, ours, hf, reference, sizes, threads)
        del hf, ours
    return rows


# --- bf16 real-model forward at the matrix units' rate ----------------------------------------


def _llama_shapes(config: Any) -> tuple[int, int, int, int, int]:
    """(d, MLP width, query heads, key/value heads, head dim) of a Llama-shaped ``config``."""
    heads = config.num_attention_heads
    hd = getattr(config, "head_dim", None) or config.hidden_size // heads
    return config.hidden_size, config.intermediate_size, heads, config.num_key_value_heads, hd


def forward_flop(config: Any, length: int) -> float:
    """FLOP of one forward of a Llama-shaped ``config`` over ``length`` tokens with its head: 2 per
    multiply-add of every projection, the MLP and the head, and causal attention counted once (q·kᵀ
    and p·v over the s²/2 pairs a query sees: 2·s²·h_d per head and layer)."""
    d, mlp, heads, kv, hd = _llama_shapes(config)
    per_token = config.num_hidden_layers * (2 * d * heads * hd + 2 * d * kv * hd + 3 * d * mlp) + d * config.vocab_size
    return 2.0 * length * per_token + config.num_hidden_layers * heads * 2.0 * hd * length**2


def matmul_rate(dtype: torch.dtype, threads: int, clock: Callable[[], float], n: int = 4096) -> float:
    """FLOP/s of an (n, n) by (n, n) matmul in ``dtype`` on ``clock`` (the best of three), the rate
    a forward is measured against; on the CPU clock per thread (``time.process_time`` counts all)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    per_thread = threads if clock is time.process_time else 1
    best = math.inf
    for _ in range(3):
        start = clock()
        a @ b
        best = min(best, (clock() - start) / per_thread)
    return 2 * n**3 / best


def matmul_seconds(
    config: Any,
    length: int,
    dtype: torch.dtype,
    clock: Callable[[], float],
    chunk: int = BLOCK_QUERIES,
    head_chunk: int = 1024,
) -> float:
    """Seconds that the matmuls of one forward of a Llama-shaped ``config`` over ``length`` tokens
    take by themselves in ``dtype``, each timed apart on random operands (the best of two) and
    counted as often as the forward runs it: the four projections and three MLP matmuls of a layer,
    the attention's two matmuls per block of ``chunk`` queries and key/value head
    (``blocked_causal_attention``: (c·r, h_d)·(h_d, e) and (c·r, e)·(e, h_d)), and the head,
    ``head_chunk`` positions at a time. With nothing else in the forward, this would be its time:
    ``forward_flop`` over it is the rate these shapes allow, the forward's ceiling."""
    d, mlp, heads, kv, hd = _llama_shapes(config)
    r = heads // kv

    def best(fn: Callable[[], None]) -> float:
        fn()
        times = []
        for _ in range(2):
            start = clock()
            fn()
            times.append(clock() - start)
        return min(times)

    def mm(m: int, k: int, n: int) -> float:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        return best(lambda: a @ b)

    layer = mm(length, d, heads * hd) + 2 * mm(length, d, kv * hd) + mm(length, heads * hd, d)
    layer += 2 * mm(length, d, mlp) + mm(length, mlp, d)
    q, k, v = (torch.randn(n, hd, dtype=dtype) for n in (length * r, length, length))
    scores = torch.empty(min(chunk, length) * r * length, dtype=dtype)

    def attention() -> None:  # one key/value head, every block of queries
        for start in range(0, length, chunk):
            stop = min(start + chunk, length)
            w = torch.mm(q[start * r : stop * r], k[:stop].T, out=scores[: (stop - start) * r * stop].view(-1, stop))
            torch.mm(w, v[:stop])

    layer += kv * best(attention)
    full, rest = divmod(length, head_chunk)
    head = full * mm(head_chunk, d, config.vocab_size) + (mm(rest, d, config.vocab_size) if rest else 0.0)
    return config.num_hidden_layers * layer + head


def _bf16_models(sizes: Sizes) -> tuple[Any, Any, str, Callable[[int], torch.Tensor]]:
    """transformers' float32 and bfloat16 copies of ``sizes.real_model`` (its token ids: the built-in
    corpus through its own tokenizer) or of a random Llama of SmolLM2-135M's shapes (random ids)."""
    import copy

    hf32, name = _real_reference(sizes)
    if sizes.real_model:
        from posenc.models import pretrained
        from posenc.tasks.text import builtin_corpus

        source = pretrained.resolve_source(sizes.real_model)
        with pretrained.quiet_loading(gguf=source.gguf_file is not None):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(source.path, **source.kwargs())
        text = builtin_corpus("pydoc", 2_000_000).decode("utf-8", "replace")
        corpus = torch.tensor(tokenizer(text)["input_ids"])

        def tokens(n: int) -> torch.Tensor:
            return corpus[None, : n + 1]  # (1, n + 1)
    else:

        def tokens(n: int) -> torch.Tensor:
            return torch.randint(0, hf32.config.vocab_size, (1, n + 1), generator=torch.Generator().manual_seed(0))

    return hf32, copy.deepcopy(hf32).to(torch.bfloat16), name, tokens


def bf16_forward(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """posenc's bfloat16 forward of a real Llama (``--real-model``, default random SmolLM2 shapes),
    the pass ``posenc extrapolate --dtype bfloat16`` runs (token losses, the head 1024 positions at a
    time), at each of ``sizes.real_lengths``: its time and peak memory against transformers' bf16
    forward of the same weights (interleaved, ``_forward_rows``' way); its FLOP rate (``forward_flop``)
    as a fraction of an (n, n) bf16 and float32 matmul's rate (``sizes.matmul_n``), both measured in
    this process before and after (goal: 0.75 of bf16's); the rate of its own matmuls timed apart
    (``matmul_seconds``), the ceiling that goal sits under, and the share of the forward's time they
    take; and the relative difference of its perplexity from posenc's float32 forward's (goal: 0.5%)."""
    import torch.nn.functional as F

    from posenc.models import from_hf_llama

    torch.set_num_threads(threads)
    clock = time.process_time if sizes.cpu_clock else time.perf_counter
    hf32, hf, name, tokens = _bf16_models(sizes)
    ours, ours32 = from_hf_llama(hf).eval(), from_hf_llama(hf32).eval()  # hf's own tensors
    gib, rows = 2**30, []
    for length in sizes.real_lengths:
        x = tokens(length)
        ids, targets = x[:, :-1], x[:, 1:]
        case = f"{name}: bf16 token losses @ {length}"
        peaks: list[list[float]] = [[], []]
        seconds: list[float] = []  # each call of posenc's, on ``clock``
        losses: list[torch.Tensor] = []

        def measured(i: int, fn: Callable[[], torch.Tensor]) -> Callable[[], None]:
            def call() -> None:
                start = clock()
                with torch.no_grad():
                    out, peak = _rss_peak(fn)
                if i == 0:
                    seconds.append(clock() - start)
                    losses.append(out.float())
                peaks[i].append(peak)

            return call

        n = sizes.matmul_n
        rates = [matmul_rate(torch.bfloat16, threads, clock, n)]
        timing = interleaved(
            measured(0, lambda: ours(ids, targets=targets, chunk=1024)),
            measured(1, lambda: F.cross_entropy(hf(ids).logits[0].float(), targets[0], reduction="none")[None]),
            threads,
            sizes.interval_rounds,
            0.0,
            warmup=0,
            clock=clock,
        )
        rates.append(matmul_rate(torch.bfloat16, threads, clock, n))
        r = row(
            "bf16 forward",
            f"{case} time vs transformers bf16",
            timing.ours,
            timing.reference,
            "s",
            "<= 1.0",
            False,
            1.0,
        )
        rows.append(_inverted(r, timing, 1.0))
        mem = [statistics.median(p) / gib for p in peaks]
        r = row("bf16 forward", f"{case} peak memory vs transformers bf16", mem[0], mem[1], "GiB", "<= 1.0", False, 1.0)
        # the first call of each sized the rounds' blocks; the rounds' calls pair up after it
        r["ratio_low"], r["ratio_high"] = median_interval([a / b for a, b in zip(peaks[0][1:], peaks[1][1:])])
        rows.append(r)
        per_thread = threads if clock is time.process_time else 1
        flop = forward_flop(hf.config, length)
        achieved = flop / (timing.ours / per_thread)
        per_round = [flop / (t / per_thread) for t in seconds[1:]]  # FLOP/s of each round's forward
        fp32 = matmul_rate(torch.float32, threads, clock, n)
        what = f"{case}: FLOP/s of its {flop / 1e12:.3g} TFLOP (causal attention once) vs a {n}² matmul's"
        for dtype, rate, goal in (("bf16", statistics.mean(rates), 0.75), ("float32", fp32, 1.0)):
            r = row(
                "bf16 forward", f"{what} in {dtype}", achieved / 1e9, rate / 1e9, "GFLOP/s", f">= {goal}", True, goal
            )
            r["ratio_low"], r["ratio_high"] = median_interval([a / rate for a in per_round])
            rows.append(r)
        # the ceiling: the rate of the matmuls this forward is made of, each shape timed apart
        alone = matmul_seconds(hf.config, length, torch.bfloat16, clock) / per_thread
        rows.append(
            row(
                "bf16 forward",
                f"{case}: FLOP/s of its matmuls alone (each shape timed apart) vs a {n}² matmul's in bf16",
                flop / alone / 1e9,
                statistics.mean(rates) / 1e9,
                "GFLOP/s",
                "report",
                True,
                0.0,
            )
        )
        rows.append(
            row(
                "bf16 forward",
                f"{case}: its matmuls' time alone vs the forward's (the share of the forward at the matmul rate)",
                alone,
                timing.ours / per_thread,
                "s",
                "report",
                True,
                0.0,
            )
        )
        with torch.no_grad():
            exact = ours32(ids, targets=targets, chunk=1024)
        ppl, ppl32 = (math.exp(float(t.mean())) for t in (losses[-1], exact))
        rows.append(
            {
                "benchmark": "bf16 forward",
                "case": f"{case}: perplexity {ppl:.5g} vs float32 {ppl32:.5g}, |relative difference|",
                "posenc": abs(ppl / ppl32 - 1),
                "reference": 0.0,
                "unit": "rel",
                "ratio": float("nan"),
                "goal": "<= 0.005",
                "met": abs(ppl / ppl32 - 1) <= 0.005,
            }
        )
    return rows


# --- ViT forward ----------------------------------------------------------------------------


def _vit(pe_name: str, resolution: int):
    from posenc.engine.build import build
    from posenc.engine.config import compose

    # train.seq_len sizes a learned table; 4096 rows cover a cls row and any grid benchmarked here
    return build(
        compose(["model=vit_tiny", f"pe={pe_name}", f"task.resolution={resolution}", "train.seq_len=4096"])
    ).model.eval()


def vit_forward(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """Forward pass of vit_tiny per 2D scheme against the learned absolute table (original ViT)
    at each resolution; then a learned table trained at the first resolution and resampled to the
    last one against a model built there: once resampled, the table costs nothing more."""
    from posenc.engine.config import options_where
    from posenc.pe.grid import fits_patches

    rows = []
    env = {"torch": torch}
    for res in sizes.vit_resolutions:
        images = torch.randn(sizes.vit_batch, 3, res, res)
        env["x"] = images
        with torch.no_grad():
            env["m"] = _vit("learned", res)
            t_ref = _median("m(x)", env, threads, sizes.min_run_time)
            for name in options_where("pe", fits_patches):
                if name == "learned":
                    continue
                env["m"] = _vit(name, res)
                t = _median("m(x)", env, threads, sizes.min_run_time)
                rows.append(
                    row("vit forward", f"{name} @ {res}px vs learned", t, t_ref, "s", "report", False, float("inf"))
                )
    low, high = sizes.vit_resolutions[0], sizes.vit_resolutions[-1]
    with torch.no_grad():
        env["x"] = torch.randn(sizes.vit_batch, 3, high, high)
        env["m"] = _vit("learned", low).set_resolution(high, "bicubic")
        t_resampled = _median("m(x)", env, threads, sizes.min_run_time)
        env["m"] = _vit("learned", high)
        t_native = _median("m(x)", env, threads, sizes.min_run_time)
    rows.append(
        row(
            "vit forward",
            f"learned {low}->{high}px resampled vs built at {high}px",
            t_resampled,
            t_native,
            "s",
            "~1.0",
            False,
            1.1,
        )
    )
    return rows


# --- CLI start-up ----------------------------------------------------------------------------


def cli_startup(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """Wall time of ``posenc --help`` (goal 0.5 s) and ``posenc list`` (1 s, it reads every
    config) in fresh processes (median)."""
    rows = []
    for args, goal in ((["--help"], 0.5), (["list"], 1.0)):
        times = []
        for _ in range(sizes.startup_repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "posenc", *args], capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        median = sorted(times)[len(times) // 2]
        rows.append(row("cli start-up", f"posenc {' '.join(args)}", median, 1.0, "s", f"< {goal:g} s", False, goal))
    return rows


SUITE_START_GOAL = 10.0  # seconds from the command to its first job (issue 30)


def suite_startup(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """Wall time of ``posenc suite --suite standard --dry-run`` (every job composed and checked,
    nothing run: what comes before the first job) in fresh processes, with empty caches; again
    with the compositions kept but every job checked (as after an edit of posenc's code); and
    with both kept (planned before): each the median of ``interval_rounds`` and its interval.
    Goal: under 10 s."""
    import tempfile
    from pathlib import Path

    only = ["--only", sizes.suite_sweeps] if sizes.suite_sweeps else []
    rows = []
    with tempfile.TemporaryDirectory(prefix="posenc-suite-startup-") as tmp:
        command = [sys.executable, "-m", "posenc", "suite", "--suite", "standard", *only, "--dry-run"]
        command += ["--results-dir", str(Path(tmp) / "results")]

        def seconds(composed: str, checked: str) -> float:
            env = {**os.environ, "POSENC_COMPOSE_CACHE": composed, "POSENC_CHECK_CACHE": checked}
            start = time.perf_counter()
            subprocess.run(command, capture_output=True, check=True, env=env)
            return time.perf_counter() - start

        rounds = range(sizes.interval_rounds)
        caches = [(str(Path(tmp) / f"composed{i}"), str(Path(tmp) / f"checked{i}")) for i in rounds]
        cases = [("nothing kept", [seconds(*kept) for kept in caches])]  # empty caches of its own each round
        composed, checked = caches[-1]
        cases.append(("compositions kept, every job checked", [seconds(composed, "off") for _ in rounds]))
        cases.append(("planned before", [seconds(composed, checked) for _ in rounds]))
        for case, times in cases:
            plan = f"posenc suite --suite standard{' --only ' + sizes.suite_sweeps if only else ''} --dry-run"
            goal = f"< {SUITE_START_GOAL:g} s"
            r = row(
                "suite start-up", f"{plan}: {case}", statistics.median(times), 1.0, "s", goal, False, SUITE_START_GOAL
            )
            r["ratio_low"], r["ratio_high"] = median_interval(times)
            rows.append(r)
    return rows


def remap_forward(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """Each position remap's long forward against the unremapped one (``posenc.benchmarks.remaps``,
    a module of its own that imports this one)."""
    from posenc.benchmarks.remaps import remap_forward as rows

    return rows(sizes, threads)


CASES = {
    "train": train_throughput,
    "precision": train_precision,
    "rope": rope_apply,
    "long": long_eval,
    "remaps": remap_forward,
    "real": real_forward,
    "decode": real_decode,
    "families": family_forward,
    "family_decode": family_decode,
    "bf16": bf16_forward,
    "vit": vit_forward,
    "cli": cli_startup,
    "suite": suite_startup,
}
