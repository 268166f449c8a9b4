"""The attention paths of ``posenc.models.blocks`` against SDPA itself."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from posenc.models.blocks import bias_attention, causal_bias_attention


def test_bias_attention_matches_sdpa_with_a_trained_mask_values_and_gradients():
    torch.manual_seed(0)
    b, n_h, s, h_d = 2, 3, 9, 8
    q, k, v = (torch.randn(b, n_h, s, h_d, requires_grad=True) for _ in range(3))
    for lead in ((), (b,)):  # one bias for the batch, or one per sequence
        bias = torch.randn(*lead, n_h, s, s, requires_grad=True)
        future = torch.ones(s, s, dtype=torch.bool).triu(1)
        grads = []
        for attend in (bias_attention, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)):
            out = attend(q, k, v, bias.masked_fill(future, float("-inf")))  # (b, n_h, s, h_d)
            grads.append((out, *torch.autograd.grad(out.square().sum(), (q, k, v, bias))))
        for ours, ref in zip(*grads):
            assert_close(ours, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("s", [1, 2, 5, 64, 130, 301])
def test_causal_bias_attention_in_query_chunks_matches_one_causal_sdpa_values_and_gradients(s):
    """A trained bias split into 1 to 4 chunks of queries (s = 1 cannot split; 5 and 301 split
    unevenly), each scoring only the keys it sees: SDPA's answer over the whole masked bias, for
    q, k, v as the model passes them (head-major views of token-major projections) and for a bias
    shared by the batch or one per sequence."""
    torch.manual_seed(0)
    b, n_h, h_d = 2, 3, 8
    future = torch.ones(s, s, dtype=torch.bool).triu(1)
    for lead in ((), (b,)):
        q, k, v = (torch.randn(b, s, n_h, h_d).transpose(1, 2).requires_grad_() for _ in range(3))
        bias = torch.randn(*lead, n_h, s, s, requires_grad=True)
        grads = []
        for attend in (
            causal_bias_attention,
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m.masked_fill(future, float("-inf"))),
        ):
            out = attend(q, k, v, bias)  # (b, n_h, s, h_d)
            grads.append((out, *torch.autograd.grad(out.square().sum(), (q, k, v, bias))))
        for ours, ref in zip(*grads):
            assert_close(ours, ref, rtol=1e-5, atol=1e-5)
        with torch.no_grad():  # one SDPA call, the same answer
            assert_close(causal_bias_attention(q, k, v, bias), grads[1][0], rtol=1e-5, atol=1e-5)


def test_bias_attention_without_gradient_is_sdpa_on_its_flash_kernel():
    """A (n_h, s, s) mask goes to SDPA as (1, n_h, s, s): the CPU flash kernel refuses a 3D mask
    and SDPA fell back to its math kernel, 5x slower at 2k tokens (the old behaviour fails here:
    with only the flash kernel allowed, SDPA finds no kernel)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    mask = torch.randn(2, 5, 5)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = bias_attention(q, k, v, mask)
        assert torch.equal(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask[None]))
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), rtol=1e-6, atol=1e-6)


def test_select_attention_by_scheme_model_and_device():
    from posenc.models.blocks import ATTENTION_BACKENDS, select_attention
    from posenc.pe.alibi import AlibiPE
    from posenc.pe.rope import RoPE
    from posenc.pe.t5 import T5BiasPE

    cpu, cuda, mps = torch.device("cpu"), torch.device("cuda", 1), torch.device("mps")
    rope, alibi, t5 = RoPE(head_dim=8), AlibiPE(n_heads=2), T5BiasPE(n_heads=2)
    assert select_attention(rope, cpu, True) == select_attention(rope, cuda, False) == "sdpa"
    # ALiBi's per-key form needs a causal mask and no chunks asked for, on any device
    assert select_attention(alibi, cpu, True) == select_attention(alibi, cuda, True) == "sdpa_key_bias"
    assert select_attention(alibi, cpu, False) == select_attention(alibi, cpu, True, bias_chunk=8) == "sdpa_bias"
    assert select_attention(alibi, cuda, False) == select_attention(t5, cuda, True) == "flex"
    assert select_attention(t5, cpu, True) == select_attention(t5, mps, False) == "sdpa_bias"
    # causal bfloat16 on the CPU: query blocks as large matmuls (posenc.models.blocked)
    bf16 = torch.bfloat16
    assert select_attention(rope, cpu, True, dtype=bf16) == "blocked_causal"
    assert select_attention(rope, cpu, False, dtype=bf16) == select_attention(rope, cuda, True, dtype=bf16) == "sdpa"
    assert select_attention(alibi, cpu, True, dtype=bf16) == "sdpa_key_bias"
    assert set(ATTENTION_BACKENDS) == {"sdpa", "blocked_causal", "sdpa_key_bias", "sdpa_bias", "flex"}


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("form", ["table", "full", "batched"])
def test_flex_bias_attention_equals_sdpa_with_the_full_mask(causal, form):
    """The CUDA path (flex_attention with the bias in a score_mod), run by eager flex_attention on
    the CPU, against SDPA with the full bias and causal mask, to 1e-5."""
    from posenc.models.blocks import flex_bias_attention
    from posenc.pe.base import table_score_mod

    torch.manual_seed(0)
    b, n_h, s, h_d = 2, 3, 40, 8
    q, k, v = (torch.randn(b, n_h, s, h_d) for _ in range(3))
    if form == "table":
        table = torch.randn(n_h, 2 * s - 1)
        i = torch.arange(s)
        bias, full = table_score_mod(table), table[:, (i[:, None] - i[None, :]) + s - 1]  # (n_h, s, s)
    else:
        bias = full = torch.randn(b if form == "batched" else 1, n_h, s, s)
    mask = full.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf")) if causal else full
    with torch.no_grad():
        ours = flex_bias_attention(q, k, v, bias, causal, compiled=False)
        reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.expand(b, n_h, s, s))
    assert_close(ours, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("start", [0, 490, 600])  # below, across and past FIRE's threshold L = 512
def test_fire_score_mod_equals_its_bias(start):
    """FIRE's own score_mod (its MLP unrolled in the kernel, per-row normaliser) in eager
    flex_attention against SDPA with ``pe.bias`` as the mask."""
    from posenc.models.blocks import flex_bias_attention
    from posenc.pe.fire import FirePE

    torch.manual_seed(0)
    pe = FirePE(n_heads=3, mlp_width=8)
    b, n_h, s, h_d = 2, 3, 48, 8
    q, k, v = (torch.randn(b, n_h, s, h_d) for _ in range(3))
    positions = torch.arange(start, start + s)
    with torch.no_grad():
        mask = pe.bias(positions, positions).masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        ours = flex_bias_attention(q, k, v, pe.score_mod(positions), True, compiled=False)
        reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[None])
    assert_close(ours, reference, rtol=1e-5, atol=1e-5)
    assert pe.score_mod(torch.stack((positions, positions))) is None and pe.score_mod(positions * 2) is None


@pytest.mark.parametrize(
    "pe,extra,start,kind",
    [
        ("t5", ["+model.bias_chunk=8"], 0, "score_mod"),  # its distance table
        ("fire", ["+model.bias_chunk=8"], 600, "score_mod"),  # past L: FIRE's own score_mod
        ("fire", [], 0, "full"),  # short: the full bias
        ("relative", [], 0, "full"),
    ],
)
def test_models_route_a_bias_to_flex_where_selected(monkeypatch, pe, extra, start, kind):
    """With the backend set to 'flex' (as CUDA selects), a model's logits equal the eager paths';
    each layer makes one flex call, with a score_mod or the full bias."""
    from posenc.engine.build import build
    from posenc.engine.config import compose
    from posenc.models import blocks

    model = build(
        compose(
            [
                "model.d_model=32",
                "model.n_layers=2",
                "model.n_heads=2",
                "model.mlp_hidden=48",
                "train.seq_len=32",
                f"pe={pe}",
                *extra,
            ]
        )
    ).model.eval()
    x, positions = torch.randint(0, 256, (2, 32)), torch.arange(start, start + 32)
    calls = []
    flex = blocks.flex_bias_attention
    with torch.no_grad():
        eager = model(x, positions)
        model.attention_backend = "flex"
        monkeypatch.setattr(
            blocks,
            "flex_bias_attention",
            lambda *a, **kw: calls.append("score_mod" if callable(a[3]) else "full") or flex(*a, **kw),
        )
        routed = model(x, positions)
    assert calls == [kind] * 2
    assert_close(routed, eager, rtol=1e-5, atol=1e-5)
