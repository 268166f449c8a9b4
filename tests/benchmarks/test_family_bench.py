"""``posenc bench``'s family rows: Llama, Qwen2 and Gemma 3 as posenc loads them against
transformers' own forward of the same weights (row plumbing at quick sizes, no timing claims)."""

import math

import pytest

pytest.importorskip("transformers")

from posenc.benchmarks.suite import Sizes, family_forward  # noqa: E402


def test_family_rows_compare_each_family_with_transformers():
    rows = family_forward(Sizes.quick(), threads=1)
    names = ["SmolLM2-135M", "Qwen2.5-0.5B", "Gemma 3 270M"]
    assert [r["case"] for r in rows] == [
        f"{name} shapes, 2 layers, random: {what} @ 64 {kind}"
        for name in names
        for what in ("logits", "token losses")
        for kind in ("time", "peak memory", "max |posenc - HF|")
    ]
    assert {r["benchmark"] for r in rows} == {"family forward"}
    assert all(r["posenc"] > 0 and r["reference"] > 0 for r in rows if r["unit"] == "s")
    # the same logits and losses: transformers' own rotary embedding against posenc's
    errors = [r["posenc"] for r in rows if r["unit"] == "abs"]
    assert len(errors) == 6 and all(0 <= e <= 1e-3 for e in errors)
    memory = [r for r in rows if r["unit"] == "GiB"]
    assert all(math.isnan(r["posenc"]) or r["posenc"] >= 0 for r in memory)


def test_the_reference_runs_transformers_own_rotary(monkeypatch):
    """Fails if the reference ran posenc's injected rotary too: with posenc's RoPE made wrong
    (positions doubled), only the posenc side moves, and the error rows of the injected families
    see it; Llama, mapped into posenc's own LM, has no injected rotary and stays equal."""
    from posenc.models import families

    real = families.InjectedRotary.forward
    monkeypatch.setattr(
        families.InjectedRotary, "forward", lambda self, x, ids, layer_type=None: real(self, x, 2 * ids, layer_type)
    )
    rows = family_forward(Sizes.quick(), threads=1)
    errors = {r["case"].split(" shapes")[0]: r["posenc"] for r in rows if r["unit"] == "abs"}
    assert errors["SmolLM2-135M"] <= 1e-3
    assert errors["Qwen2.5-0.5B"] > 1e-3 and errors["Gemma 3 270M"] > 1e-3


def test_family_decode_rows_compare_a_cached_step_with_transformers_cache():
    """Qwen2 and Gemma 3 after a context longer than Gemma's window (512): every step, on both
    sides, starts from the same cache (posenc's cut back, transformers' layers given back what
    they held), so the last step's logits are transformers' own."""
    import dataclasses

    from posenc.benchmarks.suite import family_decode

    rows = family_decode(dataclasses.replace(Sizes.quick(), real_lengths=(600,)), threads=1)
    assert [r["case"] for r in rows] == [
        f"{name} shapes, 2 layers, random: a token after 600 cached, {kind}"
        for name in ("Qwen2.5-0.5B", "Gemma 3 270M")
        for kind in ("time", "max |posenc - HF|")
    ]
    assert {r["benchmark"] for r in rows} == {"family decode"}
    assert all(r["posenc"] > 0 and r["reference"] > 0 for r in rows if r["unit"] == "s")
    assert all(r["posenc"] < 1e-4 for r in rows if r["unit"] == "abs")
