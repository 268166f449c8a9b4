"""Decoding with a cache in the families that run transformers' own modules (``InjectedLM.kv_cache``):
a prompt's forward, then the rest one or three tokens at a time, gives the logits of full forwards,
in sliding-window, soft-capped, grouped-query and partially rotated layers, under YaRN and under a
remap; a cut-back cache continues from the shorter sequence; frequencies that follow the length get
no cache."""

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

from test_families import FAMILY_CONFIGS, tiny  # noqa: E402

from posenc.models import families  # noqa: E402
from posenc.pe.remap.dual_chunk import DualChunk  # noqa: E402
from posenc.pe.remap.self_extend import SelfExtend  # noqa: E402
from posenc.pe.scaling import YaRN  # noqa: E402

S, PROMPT = 29, 15  # past the tiny models' sliding window (6) and, patched, two blocks of banded attention
REMAPPED = ["qwen3", "gemma3_text", "gpt_neox", "smollm3"]  # families whose remapped layers have no window
REMAPS = {
    "self_extend": SelfExtend(group=3, window=5, original_length=8),
    "dual_chunk": DualChunk(chunk_size=6, local_window=2, original_length=8),
}


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(families, "BAND_CHUNK", 5)


def converted(family, rope_type="default"):
    hf = tiny(family, rope_type)
    if family == "phi3":
        hf.config.sliding_window = 7  # Phi-3 mini ships one (2047); its attention reads it from the config
    with torch.no_grad():  # larger weights than the init, so positions move the logits
        for p in hf.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    return families.family_of(hf.config).convert(hf).eval()


def ids(seed=1):
    return torch.randint(0, 101, (2, S), generator=torch.Generator().manual_seed(seed))


def decoded_logits(lm, tokens, steps):
    """Logits of every position from PROMPT − 1 on: the prompt's forward fills the cache, then the
    rest ``steps`` tokens at a time."""
    cache = lm.kv_cache()
    assert cache is not None
    with torch.no_grad():
        out = [lm(tokens[:, :PROMPT], cache=cache)[:, -1:]]
        for a in range(PROMPT, S - 1, steps):
            z = min(a + steps, S - 1)
            out.append(lm(tokens[:, a:z], cache=cache))
            assert cache.length == z
    return torch.cat(out, dim=1)  # (b, S − PROMPT, V)


def full_logits(lm, tokens):
    with torch.no_grad():
        return lm(tokens[:, :-1])[:, PROMPT - 1 :]


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("family", FAMILY_CONFIGS)
def test_decoding_with_the_cache_equals_full_forwards(family, steps):
    lm, tokens = converted(family), ids()
    assert_close(decoded_logits(lm, tokens, steps), full_logits(lm, tokens), atol=3e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["qwen2", "gemma2", "gemma3_text"])
def test_decoding_under_yarn_equals_full_forwards(family):
    """posenc's YaRN on the scaled layers (Gemma 3's global ones): the cached keys were rotated
    under its frequencies and scaled cos and sin."""
    lm, tokens = converted(family), ids(2)
    YaRN(factor=4.0, original_length=8).apply(lm.pe, S)
    assert_close(decoded_logits(lm, tokens, 1), full_logits(lm, tokens), atol=3e-5, rtol=1e-5)


@pytest.mark.parametrize("remap", REMAPS)
@pytest.mark.parametrize("family", REMAPPED)
def test_decoding_under_a_remap_equals_full_forwards(family, remap):
    """The remapped layers cache their keys unrotated (transformers gets cos 1, sin 0 there) and
    every step's views rotate them again; the other layers cache them rotated."""
    lm, tokens = converted(family), ids(3)
    plain = full_logits(lm, tokens)
    lm.set_remap(REMAPS[remap])
    full = full_logits(lm, tokens)
    assert (full - plain).abs().max() > 1e-3  # the remap acts within these lengths
    assert_close(decoded_logits(lm, tokens, 2), full, atol=3e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["mistral", "gemma3_text"])
def test_a_cache_that_is_cut_back_continues_from_the_shorter_sequence(family):
    """Greedy decoding's first forward runs over the prompt and a guessed answer; cut back to the
    tokens kept, one more token equals a full forward over them and it, in windowed layers too."""
    lm, tokens = converted(family), ids(4)
    cache = lm.kv_cache()
    with torch.no_grad():
        lm(tokens, cache=cache)
        cache.truncate(PROMPT)
        step = torch.full((2, 1), 7)
        got = lm(step, cache=cache)[:, -1]
        full = lm(torch.cat((tokens[:, :PROMPT], step), dim=1))[:, -1]
    assert cache.length == PROMPT + 1
    assert_close(got, full, atol=3e-5, rtol=1e-5)


def test_frequencies_that_follow_the_length_get_no_cache():
    """A shipped dynamic NTK re-bases every forward on its length: cached keys would be stale."""
    assert converted("qwen3", "dynamic").kv_cache() is None
    assert converted("qwen3").kv_cache() is not None


def test_a_step_under_another_scale_is_refused():
    lm, tokens = converted("gemma3_text"), ids(5)
    cache = lm.kv_cache()
    with torch.no_grad():
        lm(tokens[:, :PROMPT], cache=cache)
        YaRN(factor=2.0, original_length=8).apply(lm.pe, S)
        with pytest.raises(ValueError, match="other RoPE frequencies"):
            lm(tokens[:, PROMPT : PROMPT + 1], cache=cache)
