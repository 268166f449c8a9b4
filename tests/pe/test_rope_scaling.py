"""RoPE rescaling against Hugging Face transformers' ``ROPE_INIT_FUNCTIONS`` (the reference)."""

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: E402

from posenc.core.errors import ConfigError  # noqa: E402
from posenc.pe import rope_scaling  # noqa: E402
from posenc.pe.rope import RoPE  # noqa: E402
from posenc.pe.scaling import NTK, PI, DynamicNTK, Llama3, LongRoPE, YaRN  # noqa: E402

ORIGINAL = 64


def hf_config(head_dim, params, fraction=1.0, max_pos=ORIGINAL):
    params = {"rope_theta": 10000.0, **params}
    if fraction != 1.0:
        params["partial_rotary_factor"] = fraction
    return LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        num_hidden_layers=1,
        max_position_embeddings=max_pos,
        rope_parameters=params,
    )


def lambdas(n, seed):
    return (1.0 + torch.rand(n, generator=torch.Generator().manual_seed(seed)) * 3).tolist()


# (rope_type, HF parameters, our scale), for a rotary dimension r
def cases(r, factor):
    yield "linear", {"factor": factor}, PI(factor=factor, original_length=ORIGINAL)
    yield "dynamic", {"factor": factor}, DynamicNTK(factor=factor, original_length=ORIGINAL)
    yield (
        "yarn",
        {"factor": factor, "original_max_position_embeddings": ORIGINAL},
        YaRN(factor=factor, original_length=ORIGINAL),
    )
    yield (
        "yarn",
        {
            "factor": factor,
            "original_max_position_embeddings": ORIGINAL,
            "beta_fast": 16.0,
            "beta_slow": 2.0,
            "mscale": 0.707,
            "mscale_all_dim": 1.0,
            "truncate": False,
        },
        YaRN(
            factor=factor,
            original_length=ORIGINAL,
            beta_fast=16.0,
            beta_slow=2.0,
            mscale=0.707,
            mscale_all_dim=1.0,
            truncate=False,
        ),
    )
    yield (
        "yarn",
        {"factor": factor, "original_max_position_embeddings": ORIGINAL, "attention_factor": 1.3},
        YaRN(factor=factor, original_length=ORIGINAL, attention_factor=1.3),
    )
    yield (
        "llama3",
        {
            "factor": factor,
            "original_max_position_embeddings": ORIGINAL,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
        Llama3(factor=factor, original_length=ORIGINAL),
    )
    yield (
        "llama3",
        {
            "factor": factor,
            "original_max_position_embeddings": ORIGINAL,
            "low_freq_factor": 2.0,
            "high_freq_factor": 16.0,
        },
        Llama3(factor=factor, original_length=ORIGINAL, low_freq_factor=2.0, high_freq_factor=16.0),
    )
    short, long = lambdas(r // 2, 0), lambdas(r // 2, 1)
    yield (
        "longrope",
        {"factor": factor, "original_max_position_embeddings": ORIGINAL, "short_factor": short, "long_factor": long},
        LongRoPE(factor=factor, original_length=ORIGINAL, short_factor=short, long_factor=long),
    )
    yield (
        "longrope",
        {
            "factor": factor,
            "original_max_position_embeddings": ORIGINAL,
            "short_factor": short,
            "long_factor": long,
            "attention_factor": 0.9,
        },
        LongRoPE(factor=factor, original_length=ORIGINAL, short_factor=short, long_factor=long, attention_factor=0.9),
    )


GRID = [(head_dim, fraction, factor) for head_dim in (16, 64) for fraction in (1.0, 0.5) for factor in (1.0, 2.5, 8.0)]


@pytest.mark.parametrize("head_dim,fraction,factor", GRID)
@pytest.mark.parametrize("seq_len", [ORIGINAL // 2, 4 * ORIGINAL + 3])
def test_inv_freq_and_attention_factor_match_transformers(head_dim, fraction, factor, seq_len):
    r = int(head_dim * fraction)
    seen = set()
    for rope_type, params, scale in cases(r, factor):
        inv_ref, att_ref = ROPE_INIT_FUNCTIONS[rope_type](
            hf_config(head_dim, {"rope_type": rope_type, **params}, fraction), None, seq_len=seq_len
        )
        inv, att = scale.frequencies(r, 10000.0, seq_len)
        torch.testing.assert_close(inv, inv_ref, rtol=1e-6, atol=0, msg=f"{rope_type} {params}")
        assert att == pytest.approx(att_ref, rel=1e-12), (rope_type, params)
        seen.add(rope_type)
    assert seen | {"proportional"} == set(ROPE_INIT_FUNCTIONS)


@pytest.mark.parametrize("head_dim,fraction,factor", [(16, 1.0, 1.0), (16, 0.5, 2.0), (64, 0.25, 4.0)])
def test_proportional_matches_transformers(head_dim, fraction, factor):
    config = hf_config(head_dim, {"rope_type": "proportional", "factor": factor, "partial_rotary_factor": fraction})
    inv_ref, att_ref = ROPE_INIT_FUNCTIONS["proportional"](config, None)
    inv, att = rope_scaling.proportional_frequencies(head_dim, 10000.0, fraction, factor)
    torch.testing.assert_close(inv, inv_ref, rtol=1e-6, atol=0)
    assert att == att_ref == 1.0


@pytest.mark.parametrize("factor", [1.0, 3.0, 16.0])
def test_static_ntk_is_dynamic_ntk_at_the_scaled_length(factor):
    """No HF type is static NTK; it equals HF's dynamic NTK (factor 1) at length s·L₀."""
    config = hf_config(32, {"rope_type": "dynamic", "factor": 1.0})
    inv_ref, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, None, seq_len=int(factor * ORIGINAL))
    inv, att = NTK(factor=factor, original_length=ORIGINAL).frequencies(32, 10000.0, 10**6)
    torch.testing.assert_close(inv, inv_ref, rtol=1e-5, atol=0)
    assert att == 1.0


@pytest.mark.parametrize("head_dim,fraction", [(16, 1.0), (32, 0.5)])
def test_cos_sin_match_llama_rotary_embedding(head_dim, fraction):
    """The cos/sin our RoPE uses after rescaling equal LlamaRotaryEmbedding's, attention factor included."""
    r = int(head_dim * fraction)
    positions = torch.arange(3 * ORIGINAL)
    for rope_type, params, scale in cases(r, 3.0):
        config = hf_config(head_dim, {"rope_type": rope_type, **params}, fraction)
        hf = LlamaRotaryEmbedding(config)
        cos_ref, sin_ref = hf(torch.zeros(1, dtype=torch.float32), positions[None])  # (1, s, r)
        ours = RoPE(head_dim=head_dim, rotary_fraction=fraction)
        scale.apply(ours, len(positions))
        cos, sin = ours.rotation(positions, torch.float32)  # (s, r/2)
        for got, ref in ((cos, cos_ref[0]), (sin, sin_ref[0])):
            torch.testing.assert_close(got, ref[:, : r // 2], rtol=1e-5, atol=1e-6, msg=rope_type)
            torch.testing.assert_close(got, ref[:, r // 2 :], rtol=1e-5, atol=1e-6, msg=rope_type)


def test_yarn_attention_factor_is_the_paper_formula():
    for s in (2.0, 8.0, 32.0):
        assert YaRN(factor=s).frequencies(32, 10000.0, 1)[1] == pytest.approx(0.1 * math.log(s) + 1)


def test_default_factor_is_eval_over_train_length_and_identity_within_it():
    base = rope_scaling.rope_inv_freq(32, 10000.0)
    pi = PI(original_length=100)
    torch.testing.assert_close(pi.frequencies(32, 10000.0, 400)[0], base / 4)
    for scale in (
        pi,
        NTK(original_length=100),
        YaRN(original_length=100),
        Llama3(original_length=100),
        DynamicNTK(original_length=100),
    ):
        inv, att = scale.frequencies(32, 10000.0, 100)
        torch.testing.assert_close(inv, base)
        assert att == 1.0


def test_set_frequencies_drops_cached_tables():
    rope = RoPE(head_dim=16)
    before, _ = rope.rotation(torch.arange(10), torch.float32)
    PI(factor=2.0, original_length=5).apply(rope, 10)
    after, _ = rope.rotation(torch.arange(10), torch.float32)
    expected, _ = RoPE(head_dim=16).rotation(torch.arange(10, dtype=torch.float32) / 2, torch.float32)
    torch.testing.assert_close(after, expected)
    assert not torch.allclose(before, after)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"factor": 0.0}, "scale.factor must be > 0"),
        ({"factor": -2.0}, "scale.factor must be > 0"),
    ],
)
def test_factor_must_be_positive(kwargs, match):
    for cls in (PI, NTK, YaRN, Llama3, DynamicNTK):
        with pytest.raises(ConfigError, match=match):
            cls(**kwargs)


def test_longrope_needs_lists_of_the_rotary_length():
    with pytest.raises(ConfigError, match="needs scale.short_factor"):
        LongRoPE(long_factor=[1.0] * 8)
    with pytest.raises(ConfigError, match="needs scale.long_factor"):
        LongRoPE(short_factor=[1.0] * 8)
    scale = LongRoPE(short_factor=[1.0] * 8, long_factor=[2.0] * 8)
    scale.check(RoPE(head_dim=32, rotary_fraction=0.5))  # r = 16: 8 frequencies
    with pytest.raises(ConfigError, match="scale.short_factor has 8 factors, but the rotary dimension 32 has 16"):
        scale.check(RoPE(head_dim=32))
    with pytest.raises(ConfigError, match="scale.long_factor has 7 factors"):
        LongRoPE(short_factor=[1.0] * 8, long_factor=[2.0] * 7).check(RoPE(head_dim=16))
    with pytest.raises(ConfigError, match="positive numbers"):
        LongRoPE(short_factor=[1.0] * 7 + [0.0], long_factor=[2.0] * 8)


@pytest.mark.parametrize("max_pos", [ORIGINAL, 4 * ORIGINAL, 32 * ORIGINAL])
@pytest.mark.parametrize("seq_len", [ORIGINAL // 2, ORIGINAL, ORIGINAL + 1, 8 * ORIGINAL])
def test_longrope_without_factor_has_one_attention_factor_at_every_length_as_transformers(max_pos, seq_len):
    """Fails on the old behaviour: with ``factor: null`` the attention factor followed the
    evaluated length (1.0 at or below L₀); Hugging Face takes s = max_position_embeddings /
    original_max_position_embeddings once, so it is √(1 + ln s / ln L₀) at every length."""
    short, long = lambdas(8, 0), lambdas(8, 1)
    params = {
        "rope_type": "longrope",
        "original_max_position_embeddings": ORIGINAL,
        "short_factor": short,
        "long_factor": long,
    }
    inv_ref, att_ref = ROPE_INIT_FUNCTIONS["longrope"](hf_config(16, params, max_pos=max_pos), None, seq_len=seq_len)
    scale = LongRoPE(original_length=ORIGINAL, short_factor=short, long_factor=long, max_position=max_pos)
    inv, att = scale.frequencies(16, 10000.0, seq_len)
    torch.testing.assert_close(inv, inv_ref, rtol=1e-6, atol=0)
    assert att == pytest.approx(att_ref, rel=1e-12)
    s = max_pos / ORIGINAL
    assert att == pytest.approx(math.sqrt(1 + math.log(s) / math.log(ORIGINAL)))


def test_longrope_max_position_must_be_positive():
    with pytest.raises(ConfigError, match="scale.max_position must be >= 1 or null, got 0"):
        LongRoPE(short_factor=[1.0] * 8, long_factor=[2.0] * 8, max_position=0)
