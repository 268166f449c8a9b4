import json
import math
import platform

import pandas as pd
import pytest

from posenc.benchmarks.suite import CASES, SCHEME_STEP_GOAL, Sizes, long_eval, rope_apply, row


def test_ratio_and_goal_direction():
    assert row("b", "c", 2.0, 1.0, "tokens/s", ">= 1", True, 1.0)["met"]
    assert not row("b", "c", 2.0, 1.0, "s", "<= 1", False, 1.0)["met"]
    assert row("b", "c", 0.5, 1.0, "s", "<= 1", False, 1.0)["ratio"] == 0.5


def test_rope_rows_agree_with_transformers():
    rows = rope_apply(Sizes.quick(), threads=1)
    assert [r["case"].split()[0] for r in rows] == ["forward", "forward+backward", "max"]
    assert rows[2]["posenc"] <= 1e-5 and rows[2]["met"]
    assert all(r["posenc"] > 0 and r["reference"] > 0 for r in rows[:2])
    # timed interleaved: a time ratio (posenc over HF) inside the interval of its median
    assert all(0 < r["ratio_low"] <= r["ratio"] <= r["ratio_high"] for r in rows[:2])
    assert all(r["met"] == (r["ratio"] <= 1.0) for r in rows[:2])


@pytest.mark.slow  # one fresh Python process per scheme for its peak memory
def test_long_eval_times_each_scheme_against_nope_and_measures_its_memory():
    rows = long_eval(Sizes.quick(), threads=1)
    cases = {r["case"] for r in rows}
    assert {"fire @ 64 time vs nope", "rope @ 64 peak RSS vs nope"} <= cases and not any("nope @" in c for c in cases)
    rss = [r["posenc"] for r in rows if r["unit"] == "GiB"]
    assert all(0.01 < x < 4 for x in rss)
    times = [r for r in rows if r["unit"] == "s"]
    assert all(r["posenc"] > 0 and r["reference"] > 0 and r["ratio"] > 0 for r in times)
    # 6 interleaved rounds: the time ratio (posenc over NoPE) inside the 95% interval of its median
    assert all(0 < r["ratio_low"] <= r["ratio"] <= r["ratio_high"] for r in times)
    assert all(r["met"] == (r["ratio"] <= 2.0) for r in times)


def test_vit_rows_cover_the_2d_schemes_and_resampling():
    from posenc.benchmarks.suite import vit_forward

    rows = vit_forward(Sizes.quick(), threads=1)
    cases = [r["case"] for r in rows]
    assert "rope2d_mixed @ 16px vs learned" in cases and "sincos2d @ 24px vs learned" in cases
    assert not any(c.startswith(("rope @", "alibi @")) for c in cases)  # 1D schemes do not fit a ViT
    assert cases[-1] == "learned 16->24px resampled vs built at 24px"


def test_bench_command_writes_its_table(cli, tmp_path):
    code, out, err = cli("bench", "--quick", "--only", "rope,cli", "--threads", "1", "--out", tmp_path)
    assert code == 0, err
    table = pd.read_csv(tmp_path / "bench.csv")
    assert set(table["benchmark"]) == {"rope apply", "cli start-up"}
    assert not math.isnan(table.loc[0, "ratio"])
    assert (tmp_path / "bench.md").exists()
    env = json.loads((tmp_path / "environment.json").read_text())
    assert env["cpu"]
    assert env["cpu_capability"] in {"DEFAULT", "VSX", "ZVECTOR", "AVX2", "AVX512", "SVE256"}
    assert int(env["cores"]) >= 1 and env["threads"] == "1"
    code, _, err = cli("bench", "--only", "warp", "--out", tmp_path / "x")
    assert code == 2 and f"unknown benchmark 'warp'; valid: {', '.join(CASES)}" in err and "cli" in CASES
    assert not (tmp_path / "x").exists()


def test_cpu_model_reads_the_model_name_or_falls_back(tmp_path):
    from posenc.benchmarks.suite import cpu_model

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n")
    assert cpu_model(str(info)) == "AMD EPYC 9R14 96-Core Processor"
    # a cloud machine's bare name, told apart by its x86 family and model; the first processor's
    info.write_text("cpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n\nmodel\t\t: 1\n")
    assert cpu_model(str(info)) == "AMD EPYC (family 25, model 17)"
    assert cpu_model(str(tmp_path / "missing")) == (platform.processor() or platform.machine())


def test_interleaved_alternates_and_takes_the_median_of_per_round_ratios():
    from posenc.benchmarks.suite import interleaved

    calls = []
    t_ours, t_ref, ratio, ratios = interleaved(
        lambda: calls.append("a"), lambda: calls.append("b"), threads=1, rounds=4, block_time=0.0, warmup=1
    )
    # warm-up a b, one calibration call each, then rounds a b | b a | a b | b a
    assert "".join(calls) == "ab" + "ab" + "ab" + "ba" + "ab" + "ba"
    assert t_ours > 0 and t_ref > 0 and ratio > 0 and len(ratios) == 4


def test_train_rows_pair_each_1d_scheme_with_nope():
    from posenc.benchmarks.suite import train_throughput

    rows = train_throughput(Sizes.quick(), threads=1)
    assert rows[0]["case"] == "lm_tiny rope vs HF LlamaForCausalLM" and rows[0]["goal"] == ">= 1.0"
    cases = {r["case"] for r in rows[1:]}
    assert {"rope vs nope", "kerple vs nope", "fire vs nope"} <= cases and "rope2d_mixed vs nope" not in cases
    assert all(r["posenc"] > 0 and r["reference"] > 0 and r["ratio"] > 0 for r in rows)
    assert all(r["met"] == (r["ratio"] >= (1.0 if i == 0 else SCHEME_STEP_GOAL)) for i, r in enumerate(rows))
    # six rounds (quick sizes): the 1st and 6th of the per-round ratios bound the median, 96.9%
    assert all(r["ratio_low"] <= r["ratio"] <= r["ratio_high"] for r in rows)


def test_bench_train_on_the_cpu_clock(cli, tmp_path):
    code, out, err = cli("bench", "--quick", "--only", "train", "--threads", "1", "--clock", "cpu", "--out", tmp_path)
    assert code == 0, err
    table = pd.read_csv(tmp_path / "bench.csv")
    assert list(table.columns) == [
        "benchmark",
        "case",
        "posenc",
        "reference",
        "unit",
        "ratio",
        "goal",
        "met",
        "ratio_low",
        "ratio_high",
        "cpu",
    ]
    assert (table["cpu"] == json.loads((tmp_path / "environment.json").read_text())["cpu"]).all()
    assert set(table["benchmark"]) == {"train throughput"} and (table["ratio"] > 0).all()
    assert ((table["ratio_low"] <= table["ratio"]) & (table["ratio"] <= table["ratio_high"])).all()
    assert "[" in out  # the interval beside each ratio
    assert json.loads((tmp_path / "environment.json").read_text())["clock"] == "cpu"
    code, _, err = cli("bench", "--clock", "gpu", "--out", tmp_path / "x")
    assert code == 2 and "unknown clock 'gpu'; valid: wall, cpu" in err


def test_real_forward_rows_compare_with_transformers_on_the_same_model():
    from posenc.benchmarks.suite import real_forward

    rows = real_forward(Sizes.quick(), threads=1)
    name = "SmolLM2 shapes, 2 layers, random"
    assert [r["case"] for r in rows] == [
        f"{name}: {what} @ 64 {kind}"
        for what in ("logits", "token losses")
        for kind in ("time", "peak memory", "max |posenc - HF|")
    ]
    assert all(r["posenc"] > 0 and r["reference"] > 0 for r in rows if r["unit"] == "s")
    assert all(r["met"] for r in rows if r["unit"] == "abs")  # the same logits and losses
    memory = [r for r in rows if r["unit"] == "GiB"]
    assert all(math.isnan(r["posenc"]) or r["posenc"] >= 0 for r in memory)


def test_real_decode_rows_compare_a_cached_step_with_transformers_cache():
    from posenc.benchmarks.suite import real_decode

    rows = real_decode(Sizes.quick(), threads=1)
    name = "SmolLM2 shapes, 2 layers, random"
    assert [r["case"] for r in rows] == [
        f"{name}: a token after 64 cached, {kind}" for kind in ("time", "max |posenc - HF|")
    ]
    assert rows[0]["posenc"] > 0 and rows[0]["reference"] > 0
    assert rows[1]["met"] and rows[1]["posenc"] < 1e-4  # the step's logits are transformers' own


def test_rss_peak_sees_an_allocation():
    import sys

    import torch

    from posenc.benchmarks.suite import _rss_peak

    if not sys.platform.startswith("linux"):
        pytest.skip("VmHWM is Linux's")
    _, peak = _rss_peak(lambda: torch.ones(64 * 2**20 // 4).sum())  # 64 MiB, written then freed
    assert 60 * 2**20 < peak < 200 * 2**20


def test_bench_real_options_are_checked_first(cli, tmp_path):
    code, _, err = cli("bench", "--only", "real", "--real-lengths", "4k", "--out", tmp_path / "x")
    assert code == 2 and "--real-lengths must be a comma list of integers, got '4k'" in err
    code, _, err = cli("bench", "--only", "real", "--real-model", tmp_path / "missing.gguf", "--out", tmp_path / "x")
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_precision_rows_compare_bf16_training_with_float32():
    from posenc.benchmarks.suite import PRECISION_TOLERANCE, train_precision

    rows = train_precision(Sizes.quick(), threads=1)
    assert [r["case"] for r in rows] == [
        "lm_tiny rope bf16 vs fp32",
        "lm_tiny rope bf16 vs fp32 val bits/byte after 4 steps",
    ]
    step, val = rows
    assert step["unit"] == "tokens/s" and step["posenc"] > 0 and step["reference"] > 0
    assert step["ratio_low"] <= step["ratio"] <= step["ratio_high"] and step["met"] == (step["ratio"] >= 1.0)
    # four steps from one initialisation: both near the 8 bits/byte of a uniform byte model, and
    # bf16 within the tolerance of float32 (a broken autocast path, NaN or diverged, fails here)
    assert 6.0 < val["reference"] < 8.5 and 6.0 < val["posenc"] < 8.5
    assert val["ratio"] == pytest.approx(val["posenc"] / val["reference"])
    assert val["met"] and abs(val["ratio"] - 1) <= PRECISION_TOLERANCE
    assert val["goal"] == f"|ratio - 1| <= {PRECISION_TOLERANCE:g}"
