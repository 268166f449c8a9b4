"""Attention with a bias built per chunk of queries equals attention with the full bias."""

import pytest
import torch
from torch.testing import assert_close

from posenc.models.lm import BIAS_BLOCK_ELEMENTS, CausalLM
from posenc.pe.alibi import AlibiPE
from posenc.pe.fire import FirePE
from posenc.pe.kerple import KerpleLogPE
from posenc.pe.relative import RelativeBiasPE
from posenc.pe.t5 import T5BiasPE

BIAS_SCHEMES = {
    "relative": lambda n: RelativeBiasPE(n_heads=n, max_distance=6),
    "t5": lambda n: T5BiasPE(n_heads=n, num_buckets=8, max_distance=20),
    "alibi": lambda n: AlibiPE(n_heads=n),
    "kerple": lambda n: KerpleLogPE(n_heads=n),
    "fire": lambda n: FirePE(n_heads=n, init_threshold=16.0),
}


def tiny_model(name: str, **kwargs) -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(BIAS_SCHEMES[name](4), vocab_size=17, d_model=32, n_layers=2, n_heads=4, **kwargs).eval()


@pytest.mark.parametrize("name", sorted(BIAS_SCHEMES))
def test_chunked_equals_full(name):
    model = tiny_model(name)
    idx = torch.randint(0, 17, (2, 45))
    full = model(idx)
    assert model.attention_chunk(2, 45) == 45  # short: one full bias
    batch_positions = torch.stack((torch.arange(45), torch.arange(45) * 2 + 5))
    full_batch = model(idx, batch_positions)
    for chunk in (1, 7, 16, 44, 45):  # 45: one full relative bias; auto (None) is ALiBi's key-only form
        model.bias_chunk = chunk
        assert_close(model(idx), full, rtol=1e-5, atol=1e-5)
        assert_close(model(idx, batch_positions), full_batch, rtol=1e-5, atol=1e-5)


def test_chunked_gradients_equal_full():
    idx = torch.randint(0, 17, (2, 30))
    grads = []
    for chunk in (None, 8):
        model = tiny_model("kerple", bias_chunk=chunk).train()
        model(idx).logsumexp(-1).mean().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)


def test_long_sequences_never_build_a_full_bias():
    torch.manual_seed(0)
    model = CausalLM(KerpleLogPE(n_heads=2), vocab_size=5, d_model=8, n_layers=1, n_heads=2, mlp_hidden=8).eval()
    shapes = []
    bias = model.pe.bias
    model.pe.bias = lambda q, k: shapes.append((len(q), len(k))) or bias(q, k)
    s = 4096
    chunk = model.attention_chunk(1, s)
    assert chunk == BIAS_BLOCK_ELEMENTS // (2 * s) == 512
    with torch.no_grad():
        out = model(torch.randint(0, 5, (1, s)))
    assert torch.isfinite(out).all()
    assert len(shapes) == s // chunk
    assert shapes[0] == (512, 512) and shapes[-1] == (512, s)  # causal: keys up to the chunk's end
    assert max(q * k for q, k in shapes) * 2 <= BIAS_BLOCK_ELEMENTS


def test_bad_chunk_is_a_config_error():
    from posenc.core.errors import ConfigError

    with pytest.raises(ConfigError, match="model.bias_chunk must be >= 1"):
        tiny_model("alibi", bias_chunk=0)


def test_alibi_key_only_form_runs_without_any_mask_and_matches_the_relative_form():
    torch.manual_seed(0)
    model = CausalLM(AlibiPE(n_heads=4), vocab_size=5, d_model=16, n_layers=1, n_heads=4, mlp_hidden=16).eval()
    bias = model.pe.bias
    model.pe.bias = lambda q, k: (_ for _ in ()).throw(AssertionError("relative bias built"))
    idx = torch.randint(0, 5, (1, 2048))
    with torch.no_grad():
        key_only = model(idx)
        model.pe.bias, model.bias_chunk = bias, 256
        relative = model(idx)
        # shuffled positions: the key-only form would be wrong, so the relative form is used
        model.bias_chunk = None
        shuffled = torch.randperm(2048)
        assert torch.equal(model(idx, shuffled), model.eval()(idx, shuffled))
    # m·(j − c) reaches ±m·s/2 = ±256 here: float32 rounding of those logits stays below 1e-4
    assert_close(key_only, relative, rtol=1e-4, atol=1e-4)


def test_key_only_path_needs_float32():
    model = tiny_model("alibi")
    bias, _ = model.attention_bias(torch.arange(8), 1, torch.float32)
    assert bias.shape == (4, 1, 8)
    bias, chunk = model.attention_bias(torch.arange(8), 1, torch.bfloat16)
    assert bias.shape == (4, 8, 8) and chunk == 8
