"""A CausalLM with ``causal=False`` (the bidirectional twin `posenc order` measures)."""

import torch

from posenc.models.lm import CausalLM
from posenc.pe.alibi import AlibiPE
from posenc.pe.nope import NoPE


def model(pe, **kw):
    torch.manual_seed(0)
    return CausalLM(pe, vocab_size=20, d_model=32, n_layers=2, n_heads=4, mlp_hidden=64, causal=False, **kw)


def test_bidirectional_sees_the_future():
    m = model(NoPE())
    x = torch.randint(0, 20, (2, 9))
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % 20
    assert (m(x)[:, 0] - m(y)[:, 0]).abs().max() > 1e-6  # the first token reads the last one


def test_bidirectional_alibi_never_takes_the_causal_only_key_bias():
    # the per-key form of ALiBi equals its bias only under a causal mask
    x = torch.randint(0, 20, (2, 12))
    full, chunked = model(AlibiPE(4)), model(AlibiPE(4), bias_chunk=5)
    torch.testing.assert_close(full(x), chunked(x), atol=1e-5, rtol=1e-5)
