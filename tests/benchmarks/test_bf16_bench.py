"""``posenc bench --only bf16``: posenc's bf16 forward against transformers' bf16 forward, its FLOP
rate against the matmul rates measured in the same process, and its perplexity against float32's
(row plumbing at quick sizes, no timing claims)."""

import math
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from posenc.benchmarks.suite import (  # noqa: E402
    SMOLLM2_SHAPES,
    Sizes,
    bf16_forward,
    forward_flop,
    matmul_seconds,
)
from posenc.core.dtypes import BF16_CPU_FLAGS, cpu_flags  # noqa: E402


def test_forward_flop_counts_smollm2_as_the_issue_does():
    """SmolLM2-135M at 16,384 tokens: 4.40 TFLOP of projections, MLP and head, 9.28 of causal attention."""
    from transformers import LlamaConfig

    config = LlamaConfig(**SMOLLM2_SHAPES)
    assert forward_flop(config, 16384) == pytest.approx(13.684e12, rel=1e-4)  # "about 13.7"
    linear = forward_flop(config, 1) - forward_flop(config, 0)  # per token, less the s² term's 1
    # 7,077,888 FLOP per token and layer (q, k, v, o and the MLP), 2·d·V for the head
    assert linear == pytest.approx(30 * 7_077_888 + 2 * 576 * 49152, abs=30 * 9 * 2 * 64)


def test_bf16_rows_time_rate_and_perplexity():
    rows = bf16_forward(Sizes.quick(), threads=1)
    case = "SmolLM2 shapes, 2 layers, random: bf16 token losses @ 64"
    assert [r["case"].split(": ", 1)[0] for r in rows] == [case.split(": ")[0]] * 7
    time, memory, bf16, fp32, ceiling, share, ppl = rows
    assert time["unit"] == "s" and time["posenc"] > 0 and time["reference"] > 0 and time["goal"] == "<= 1.0"
    # 6 interleaved rounds: each ratio inside the 95% interval of its median (the smallest and the
    # largest round's); the FLOP rates' from each round's forward against the same matmul rate
    for r in (time, bf16, fp32) + ((memory,) if not math.isnan(memory["posenc"]) else ()):
        assert r["ratio_low"] <= r["ratio"] <= r["ratio_high"], r["case"]
    assert bf16["ratio_low"] / fp32["ratio_low"] == pytest.approx(fp32["reference"] / bf16["reference"])
    assert memory["unit"] == "GiB" and (math.isnan(memory["posenc"]) or memory["posenc"] >= 0)
    # the FLOP count is stated, the rates are GFLOP/s of the forward over the (quick: 256²) matmul's
    assert "0.00454 TFLOP" in bf16["case"] and "256² matmul" in bf16["case"]
    assert bf16["case"].endswith("in bf16") and fp32["case"].endswith("in float32")
    assert bf16["posenc"] == fp32["posenc"] > 0 and bf16["reference"] > 0 and fp32["reference"] > 0
    if (cpu_flags() or set()) & set(BF16_CPU_FLAGS):
        assert bf16["reference"] > fp32["reference"]  # bf16 matrix units: bf16 outruns float32
    assert bf16["ratio"] == pytest.approx(bf16["posenc"] / bf16["reference"]) and bf16["goal"] == ">= 0.75"
    # the ceiling: the same FLOP over the matmuls' time alone, against the same matmul rate
    assert "matmuls alone" in ceiling["case"] and ceiling["reference"] == bf16["reference"]
    assert ceiling["unit"] == "GFLOP/s" and ceiling["posenc"] > 0 and ceiling["goal"] == "report"
    assert share["unit"] == "s" and share["reference"] == pytest.approx(time["posenc"])
    assert share["posenc"] == pytest.approx(bf16["posenc"] / ceiling["posenc"] * share["reference"])
    # a random model's perplexity is about its vocabulary; bf16 moves it by well under 0.5%
    assert ppl["unit"] == "rel" and 0 <= ppl["posenc"] <= 0.005 and ppl["met"]
    assert 20_000 < float(ppl["case"].split("perplexity ")[1].split()[0]) < 200_000


def test_matmul_seconds_counts_each_shape_as_often_as_the_forward_runs_it():
    """A clock that ticks once per reading makes every timed shape take 1 s: the total counts the
    forward's matmuls, 7 per layer (q, k, v, o, gate, up, down), one timed loop of attention blocks
    per key/value head and layer, and one head matmul per ``head_chunk`` positions."""
    ticks = iter(range(10**6))
    config = SimpleNamespace(**{**SMOLLM2_SHAPES, "num_hidden_layers": 2})  # 3 key/value heads
    seconds = matmul_seconds(config, 96, torch.bfloat16, lambda: next(ticks), chunk=32, head_chunk=40)
    assert seconds == 2 * (7 + 3) + 3  # head: 40 + 40 + 16 positions
    assert matmul_seconds(config, 80, torch.bfloat16, lambda: next(ticks), chunk=32, head_chunk=40) == 2 * 10 + 2
