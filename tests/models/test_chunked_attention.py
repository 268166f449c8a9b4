"""Attention with a bias built per chunk of queries equals attention with the full bias."""

import pytest
import torch
from torch.testing import assert_close

from posenc.models.blocks import chunked_bias_attention
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
        out = model(torch.randint(0, 5, (1, s)), torch.arange(s) * 2)  # no Toeplitz bias: blocks built
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


def test_key_only_path_needs_float32_and_a_length_past_batch_times_head_dim():
    model = tiny_model("alibi")  # head_dim 8
    bias, _ = model.attention_bias(torch.arange(9), 1, torch.float32)
    assert bias.shape == (4, 1, 9)
    bias, chunk = model.attention_bias(torch.arange(9), 1, torch.bfloat16)
    assert bias.shape == (4, 9, 9) and chunk == 9
    # s <= b·h_d (a training batch): the one full bias the batch shares, not three widened copies
    bias, chunk = model.attention_bias(torch.arange(9), 2, torch.float32)
    assert bias.shape == (4, 9, 9) and chunk == 9
    idx = torch.randint(0, 17, (2, 9))
    full = model(idx)
    model.bias_chunk = 9  # the relative form, built by the chunked path
    assert_close(full, model(idx), rtol=1e-5, atol=1e-5)
    model.bias_chunk = None
    assert_close(full[:1], model(idx[:1]), rtol=1e-5, atol=1e-5)  # batch 1: the key-only form


# --- the bias of i − j as views of one vector (toeplitz_bias_attention) --------------------------

TOEPLITZ_SCHEMES = {
    **BIAS_SCHEMES,
    "t5_bidirectional": lambda n: T5BiasPE(n_heads=n, num_buckets=8, max_distance=20, bidirectional=True),
    "fire": lambda n: FirePE(n_heads=n, init_threshold=4096.0),  # every query below L: i − j alone
}


def full_bias_attention(q, k, v, pe, positions, causal):
    """The reference: SDPA's math kernel with the whole (…, n_h, s, s) bias and causal mask."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    s = q.shape[2]
    mask = pe.bias(positions, positions)
    if causal:
        mask = mask.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    with sdpa_kernel(SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[(None,) * (4 - mask.dim())])


def qkv(b=2, n_h=3, s=45, h_d=8, requires_grad=False):
    torch.manual_seed(1)
    return [torch.randn(b, n_h, s, h_d, requires_grad=requires_grad) for _ in range(3)]


CONTIGUOUS = (torch.arange(45), torch.arange(45) + 37, torch.stack((torch.arange(45), torch.arange(45) + 300)))
NOT_CONTIGUOUS = (
    torch.randperm(200, generator=torch.Generator().manual_seed(0))[:45].sort().values,  # randomized (Ruoss et al.)
    torch.stack((torch.arange(45) * 2, torch.arange(45) + 5)),  # one row contiguous, one not
    torch.arange(45).float(),  # rescaled positions are floats
)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", sorted(TOEPLITZ_SCHEMES))
@pytest.mark.parametrize("contiguous", [True, False])
def test_chunks_equal_the_full_bias_on_the_view_and_the_general_path(name, causal, contiguous):
    """Contiguous positions (shifted, batched) take the views of ``distance_bias``; any other
    positions must fall back to bias blocks; both equal the full bias at every chunk boundary."""
    torch.manual_seed(0)
    pe = TOEPLITZ_SCHEMES[name](3)
    q, k, v = qkv()
    for positions in CONTIGUOUS if contiguous else NOT_CONTIGUOUS:
        assert (pe.distance_bias(positions) is not None) == contiguous  # the path under test is the one that runs
        reference = full_bias_attention(q, k, v, pe, positions, causal)
        for chunk in (1, 7, 16, 44, 45, 64):  # chunk boundaries inside, at and past the sequence
            out = chunked_bias_attention(q, k, v, pe, positions, chunk, causal, view_chunk=chunk)
            assert_close(out, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
def test_fire_past_its_threshold_takes_its_distance_rows(causal):
    """Past L each query row has its own normaliser ψ(i): no Toeplitz bias, but rows of
    ``distance_rows`` as views; batched positions fall back to bias blocks. All equal the full bias."""
    torch.manual_seed(0)
    pe = FirePE(n_heads=3, init_threshold=16.0)
    with torch.no_grad():
        for p in pe.mlp.parameters():
            p.normal_()  # knots spread over [0, 1], so blocks straddle them
    assert pe.distance_bias(torch.arange(16)) is not None
    assert pe.distance_bias(torch.arange(17)) is None  # query 16 is normalised by ψ(16), not ψ(L)
    q, k, v = qkv()
    rows = pe.distance_rows
    for positions in (torch.arange(45), torch.arange(45) + 1000, torch.stack((torch.arange(45), torch.arange(45) + 9))):
        calls = []
        pe.distance_rows = lambda qp, d, out=None: calls.append(len(qp)) or rows(qp, d, out)
        reference = full_bias_attention(q, k, v, pe, positions, causal)
        for chunk in (1, 7, 16, 45, 64):
            attend = lambda: chunked_bias_attention(q, k, v, pe, positions, chunk, causal, rows_elements=0)  # noqa: E731
            assert_close(attend(), reference, rtol=1e-5, atol=1e-5)
            with torch.no_grad():  # every chunk's rows written into one buffer
                assert_close(attend(), reference, rtol=1e-5, atol=1e-5)
        # by default a chunk takes as many queries as ROWS_BLOCK_ELEMENTS allows: here all 45
        calls.clear()
        assert_close(chunked_bias_attention(q, k, v, pe, positions, 7, causal), reference, rtol=1e-5, atol=1e-5)
        assert calls == ([45] if positions.dim() == 1 else [])
        assert bool(calls) == (positions.dim() == 1)  # (b, s) positions: the general path


@pytest.mark.parametrize("name", ["relative", "kerple", "fire", "fire_rows"])
def test_view_gradients_equal_the_full_bias(name):
    torch.manual_seed(0)
    pe = FirePE(n_heads=3, init_threshold=16.0) if name == "fire_rows" else TOEPLITZ_SCHEMES[name](3)
    positions = torch.arange(45) + 3
    grads = []
    for attend in (
        lambda q, k, v: full_bias_attention(q, k, v, pe, positions, True),
        lambda q, k, v: chunked_bias_attention(q, k, v, pe, positions, 7, view_chunk=7, rows_elements=0),
    ):
        pe.zero_grad()
        q, k, v = qkv(requires_grad=True)
        attend(q, k, v).square().sum().backward()
        grads.append([q.grad, k.grad, v.grad] + [p.grad for p in pe.parameters()])
    for new, old in zip(grads[1], grads[0]):
        assert_close(new, old, rtol=1e-4, atol=1e-5)


def test_the_model_asks_the_scheme_for_its_distance_bias_and_never_builds_blocks():
    torch.manual_seed(0)
    model = CausalLM(KerpleLogPE(n_heads=2), vocab_size=5, d_model=8, n_layers=2, n_heads=2, mlp_hidden=8).eval()
    calls = []
    distance_bias = model.pe.distance_bias
    model.pe.bias = lambda q, k: (_ for _ in ()).throw(AssertionError("bias block built"))
    model.pe.distance_bias = lambda positions: calls.append(positions.shape) or distance_bias(positions)
    with torch.no_grad():
        assert torch.isfinite(model(torch.randint(0, 5, (1, 4096)))).all()
    assert calls == [torch.Size([4096])] * 2  # once per layer, one (n_h, 2s − 1) vector each
