"""Decoding with a cache (``CausalLM.kv_cache``): a step over new tokens after cached ones gives the
logits a full forward over every token gives, under every remap, with grouped-query heads and layers
without RoPE; schemes, and frequencies, that the cache cannot extend get none."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from posenc.models.lm import CausalLM
from posenc.pe.alibi import AlibiPE
from posenc.pe.learned import LearnedPE
from posenc.pe.nope import NoPE
from posenc.pe.remap.dual_chunk import DualChunk
from posenc.pe.remap.rerope import LeakyReRoPE, ReRoPE
from posenc.pe.remap.self_extend import SelfExtend
from posenc.pe.remap.sinks import AttentionSinks
from posenc.pe.rope import RoPE
from posenc.pe.scaling import DynamicNTK, YaRN
from posenc.pe.xpos import XPos

S, PROMPT = 37, 20
REMAPS = {
    "none": None,
    "self_extend": SelfExtend(group=3, window=5, original_length=16),
    "rerope": ReRoPE(window=4, original_length=16),
    "leaky_rerope": LeakyReRoPE(window=4, k=2.5, original_length=16),
    "sinks": AttentionSinks(n_sink=2, window=5, original_length=16),
    "dual_chunk": DualChunk(chunk_size=7, local_window=2, original_length=16),
}


def lm(pe, seed=0):
    torch.manual_seed(seed)
    model = CausalLM(pe, vocab_size=50, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2).eval()
    with torch.no_grad():  # larger weights than the 0.02 init, so positions move the outputs
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
    return model


def decoded_logits(model, ids, steps):
    """Logits of every position from PROMPT on: the prompt's forward fills the cache, then the rest
    in ``steps`` tokens at a time."""
    cache = model.kv_cache()
    with torch.no_grad():
        out = [model(ids[:, :PROMPT], cache=cache)[:, -1:]]
        for a in range(PROMPT, ids.shape[1] - 1, steps):
            z = min(a + steps, ids.shape[1] - 1)
            out.append(model(ids[:, a:z], cache=cache))
            assert cache.length == z
    return torch.cat(out, dim=1)  # (b, S − PROMPT, V): predictions after positions PROMPT − 1..S − 2


@pytest.mark.parametrize("remap", REMAPS)
@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("yarn", [False, True])
def test_decoding_with_the_cache_equals_full_forwards(remap, steps, yarn):
    """A prompt's forward, then tokens 1 or 3 at a time, with layer 1 left without RoPE; on the
    model's own frequencies or on YaRN's (which also scale cos and sin)."""
    model = lm(RoPE(8, nope_layers=(1,)))
    if yarn:
        YaRN(factor=2.0, original_length=16).apply(model.pe, S)
    model.set_remap(REMAPS[remap])
    ids = torch.randint(0, 50, (2, S), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids[:, :-1])[:, PROMPT - 1 :]
    assert_close(decoded_logits(model, ids, steps), full, atol=2e-5, rtol=2e-5)


def test_frequencies_that_follow_the_length_get_no_cache():
    """Dynamic NTK re-bases every forward on its length, which moves every earlier token's hidden
    states: a cache of them would be stale, so such a model decodes by full forwards, and a cache
    forced on it is refused at the first step whose frequencies moved."""
    model = lm(RoPE(8))
    model.follow_length(DynamicNTK(factor=2.0, original_length=16))
    assert model.kv_cache() is None
    ids = torch.randint(0, 50, (1, S), generator=torch.Generator().manual_seed(2))
    stale = lm(RoPE(8)).kv_cache()
    with torch.no_grad():
        model(ids[:, :PROMPT], cache=stale)
        with pytest.raises(ValueError, match="other RoPE frequencies"):
            model(ids[:, PROMPT : PROMPT + 1], cache=stale)
    model.follow_length(None)
    assert model.kv_cache() is not None


def test_a_step_under_another_scale_or_remap_is_refused():
    """The cached keys and hidden states belong to the frequencies and remap of the prompt's
    forward: a step under YaRN, or under a remap set since, would mix two models; emptied (cut
    back to no tokens), the cache takes the new ones."""
    model = lm(RoPE(8))
    ids = torch.randint(0, 50, (1, S), generator=torch.Generator().manual_seed(5))
    cache = model.kv_cache()
    with torch.no_grad():
        model(ids[:, :PROMPT], cache=cache)
        model.set_remap(REMAPS["self_extend"])
        with pytest.raises(ValueError, match="another remap"):
            model(ids[:, PROMPT : PROMPT + 1], cache=cache)
        model.set_remap(None)
        YaRN(factor=2.0, original_length=16).apply(model.pe, S)
        with pytest.raises(ValueError, match="other RoPE frequencies"):
            model(ids[:, PROMPT : PROMPT + 1], cache=cache)
        cache.truncate(0)
        model(ids[:, :PROMPT], cache=cache)
        got = model(ids[:, PROMPT : PROMPT + 1], cache=cache)[:, -1]
        full = model(ids[:, : PROMPT + 1])[:, -1]
    assert_close(got, full, atol=2e-5, rtol=2e-5)


def test_a_cache_that_is_cut_back_continues_from_the_shorter_sequence():
    """Decoding after a forward over a longer guess (the passkey's answer): the cache cut back to
    the tokens kept, then another token, equals a full forward over the kept tokens and that one."""
    model = lm(RoPE(8))
    ids = torch.randint(0, 50, (1, S), generator=torch.Generator().manual_seed(3))
    cache = model.kv_cache()
    with torch.no_grad():
        model(ids, cache=cache)
        cache.truncate(PROMPT)
        got = model(torch.tensor([[7]]), cache=cache)[:, -1]
        full = model(torch.cat((ids[:, :PROMPT], torch.tensor([[7]])), dim=1))[:, -1]
    assert cache.length == PROMPT + 1
    assert_close(got, full, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize(
    "pe, cached",
    [
        (lambda: RoPE(8), True),
        (lambda: NoPE(), True),
        (lambda: AlibiPE(4), False),
        (lambda: LearnedPE(32, 64), False),
        (lambda: XPos(8), False),
    ],
)
def test_a_cache_only_for_schemes_whose_keys_extend_unchanged(pe, cached):
    """RoPE (rotated anew each step) and NoPE extend a cache; a bias, an added embedding or xPos's
    position-centred scales would need more than unrotated keys, so those decode by full forwards."""
    assert (lm(pe()).kv_cache() is not None) is cached


def test_nope_decodes_with_the_cache_as_full_forwards():
    model = lm(NoPE())
    ids = torch.randint(0, 50, (1, S), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = model(ids[:, :-1])[:, PROMPT - 1 :]
    assert_close(decoded_logits(model, ids, 2), full, atol=2e-5, rtol=2e-5)
