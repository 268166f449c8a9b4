"""Remaps in a whole model: a tiny random Llama loaded into posenc scores the same perplexity with
each remap as with the explicit construction in every layer; ``none`` changes no bit."""

from __future__ import annotations

import math

import pytest
import torch
from remap_reference import ReferenceRemap

from posenc.pe.remap.base import NoRemap
from posenc.pe.remap.dual_chunk import DualChunk
from posenc.pe.remap.rerope import LeakyReRoPE, ReRoPE
from posenc.pe.remap.self_extend import SelfExtend
from posenc.pe.remap.sinks import AttentionSinks
from posenc.pe.scaling import YaRN

S = 40  # tokens scored, past the model's 32 trained positions
REMAPS = {
    "self_extend": SelfExtend(group=4, window=8, original_length=32),
    "rerope": ReRoPE(window=8, original_length=32),
    "leaky_rerope": LeakyReRoPE(window=8, k=4.0, original_length=32),
    "sinks": AttentionSinks(n_sink=3, window=12, original_length=32),
    "dual_chunk": DualChunk(chunk_size=12, local_window=3, original_length=32),
}


@pytest.fixture(scope="module")
def llama():
    from hf_models import tiny_llama

    from posenc.models.hf import from_hf_llama

    return from_hf_llama(tiny_llama(max_positions=32))


def perplexity(lm, ids: torch.Tensor) -> float:
    with torch.no_grad():
        losses = lm(ids[:, :-1], targets=ids[:, 1:], chunk=16)  # (b, s − 1)
    return math.exp(float(losses.double().mean()))


@pytest.fixture
def ids():
    return torch.randint(0, 384, (2, S + 1), generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("name", REMAPS)
def test_perplexity_equals_the_construction(llama, ids, name):
    remap = REMAPS[name]
    llama.set_remap(None)
    plain = perplexity(llama, ids)
    llama.set_remap(ReferenceRemap(remap))
    expected = perplexity(llama, ids)
    llama.set_remap(remap)
    assert llama.attention_backend == "remap"
    got = perplexity(llama, ids)
    llama.set_remap(None)
    assert got == pytest.approx(expected, rel=1e-5)
    assert abs(got - plain) / plain > 1e-3  # the remap changed the model's predictions


def test_with_yarn_installed(llama, ids):
    """A frequency scaling and a remap at once: YaRN's frequencies under Self-Extend's positions."""
    remap = REMAPS["self_extend"]
    trained = (llama.pe.inv_freq.clone(), llama.pe.attention_scaling)
    YaRN(factor=2.0, original_length=32).apply(llama.pe, S)
    try:
        llama.set_remap(ReferenceRemap(remap))
        expected = perplexity(llama, ids)
        llama.set_remap(remap)
        assert perplexity(llama, ids) == pytest.approx(expected, rel=1e-5)
    finally:
        llama.set_remap(None)
        llama.pe.set_frequencies(*trained)


def test_none_changes_no_bit(llama, ids):
    llama.set_remap(None)
    backend = llama.attention_backend
    with torch.no_grad():
        before = llama(ids)
        llama.set_remap(NoRemap())
        assert llama.attention_backend == backend and llama.remap is None
        after = llama(ids)
    assert torch.equal(before, after)


def test_tiny_lm_of_the_config_tree_none_changes_no_bit():
    """posenc's own LM built from the composed config (remap: none by default) gives the same logits
    as the model built without the group; with remap=self_extend the build carries it, unapplied."""
    from omegaconf import open_dict

    from posenc.engine.build import build
    from posenc.engine.config import compose

    cfg = compose(["train.seq_len=32"])
    assert cfg.choices.remap == "none"
    setup = build(cfg)
    without = compose(["train.seq_len=32"])
    with open_dict(without):
        del without["remap"]
    plain = build(without)
    x = torch.randint(0, 256, (2, 32))
    setup.model.set_remap(setup.remap)
    with torch.no_grad():
        assert torch.equal(setup.model(x), plain.model(x))
    extended = build(compose(["train.seq_len=32", "remap=self_extend", "remap.group=2"]))
    assert isinstance(extended.remap, SelfExtend) and extended.remap.window == 8  # a quarter of 32
    assert extended.model.remap is None  # applied where a scale is: to the model scored
