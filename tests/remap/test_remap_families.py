"""Remaps in the families that run transformers' own modules (posenc.models.families.InjectedLM):
with a window past the sequence a remap changes no logit (transformers gets no rotation, posenc
rotates q and k itself, at Gemma's own score scale); with a short one the logits equal the explicit
construction's in the remapped layers; soft-capped or sliding-window layers are refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

transformers = pytest.importorskip("transformers")

from remap_reference import ReferenceRemap  # noqa: E402

from posenc.models.families import InjectedLM, remap_refusal  # noqa: E402
from posenc.pe.remap.dual_chunk import DualChunk  # noqa: E402
from posenc.pe.remap.rerope import ReRoPE  # noqa: E402
from posenc.pe.remap.self_extend import SelfExtend  # noqa: E402

S = 24
COMMON = dict(
    vocab_size=101,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=32,
)
ALTERNATING = ["sliding_attention", "full_attention"] * 2
FAMILIES = {
    "qwen2": ("Qwen2Config", {"rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}}),
    "gemma3_text": (
        "Gemma3TextConfig",
        {
            "sliding_window": 6,
            "layer_types": ALTERNATING,
            "query_pre_attn_scalar": 24,  # a score scale that is not 1/sqrt(h_d)
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 1000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
            },
        },
    ),
    "gpt_neox": (
        "GPTNeoXConfig",
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.25}},
    ),
    "smollm3": (
        "SmolLM3Config",
        {
            "no_rope_layers": [1, 1, 0, 1],
            "pad_token_id": 0,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0},
        },
    ),
}


def tiny(family: str) -> InjectedLM:
    name, own = FAMILIES[family]
    kwargs = {**COMMON, **own}
    if family == "gpt_neox":
        kwargs.pop("num_key_value_heads"), kwargs.pop("head_dim")
    config = getattr(transformers, name)(**kwargs, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # larger weights than the init, so positions change the logits
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    return InjectedLM(model)


@pytest.fixture
def ids():
    return torch.randint(0, 101, (2, S), generator=torch.Generator().manual_seed(5))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_window_past_the_sequence_changes_no_logit(family, ids):
    lm = tiny(family)
    with torch.no_grad():
        plain = lm(ids)
        lm.set_remap(ReRoPE(window=S, original_length=32))
        assert lm.remap is not None and lm._remapped
        remapped = lm(ids)
        lm.set_remap(None)
        again = lm(ids)
    torch.testing.assert_close(remapped, plain, atol=1e-5, rtol=1e-5)
    assert torch.equal(again, plain)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "remap",
    [SelfExtend(group=3, window=5, original_length=32), DualChunk(chunk_size=6, local_window=2, original_length=32)],
)
def test_logits_equal_the_construction(family, remap, ids):
    lm = tiny(family)
    with torch.no_grad():
        plain = lm(ids)
        lm.set_remap(ReferenceRemap(remap))
        expected = lm(ids)
        lm.set_remap(remap)
        got = lm(ids)
    torch.testing.assert_close(got, expected, atol=3e-5, rtol=1e-5)  # float32 sums: ~1e-5 apart on AVX2
    assert (got - plain).abs().max() > 1e-3


def test_gemma3_remaps_its_global_layers_only():
    lm = tiny("gemma3_text")
    lm.set_remap(SelfExtend(group=3, window=5, original_length=32))
    assert [a.layer_idx for a in lm._remapped] == [1, 3]  # the full_attention layers
    assert lm.model.base_model.rotary_emb.unrotated == {"full_attention"}


@pytest.mark.parametrize(
    "config,layers,why",
    [
        (dict(attn_logit_softcapping=50.0), None, "its attention scores are soft-capped"),
        (dict(sliding_window=4096), None, "its remapped layers attend within a sliding window"),
        (
            dict(sliding_window=8, layer_types=["full_attention", "sliding_attention"]),
            None,
            "its remapped layers attend within a sliding window",
        ),
        (dict(sliding_window=8, layer_types=ALTERNATING), "sliding_attention", "within a sliding window"),
        (dict(sliding_window=8, layer_types=ALTERNATING), "full_attention", None),  # Gemma 3's global layers
        (dict(sliding_window=None), None, None),  # Qwen2 without its window layers
    ],
)
def test_soft_capped_and_sliding_window_layers_are_refused(config, layers, why):
    got = remap_refusal(SimpleNamespace(**config), layers)
    assert got == why if why is None else why in got
