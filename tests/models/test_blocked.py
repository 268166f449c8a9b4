"""``blocked_causal_attention`` against SDPA's causal attention, and the models that run it in bf16."""

import pytest
import torch
import torch.nn.functional as F

from posenc.models.blocked import blocked_causal_attention, runs_blocked


def _qkv(b, n_h, n_kv, s, h_d, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, s, n_h, h_d, generator=g).transpose(1, 2)  # (b, n_h, s, h_d), projection layout
    k = torch.randn(b, s, n_kv, h_d, generator=g).transpose(1, 2)
    v = torch.randn(b, s, n_kv, h_d, generator=g).transpose(1, 2)
    return q.to(dtype), k.to(dtype), v.to(dtype)


@pytest.mark.parametrize("n_h,n_kv,s,chunk", [(6, 2, 50, 16), (4, 4, 33, 64), (3, 1, 17, 1)])
def test_equals_sdpa_causal_in_float32(n_h, n_kv, s, chunk):
    """Blocks that do not divide s, a last block of one query, grouped and plain heads."""
    q, k, v = _qkv(2, n_h, n_kv, s, 8)
    ours = blocked_causal_attention(q, k, v, chunk=chunk)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=n_kv != n_h)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    assert ours.transpose(1, 2).is_contiguous()  # (b, s, n_h, h_d): the output projection reads it as is


def test_scale_is_the_one_asked_for():
    q, k, v = _qkv(1, 4, 2, 40, 8)
    ours = blocked_causal_attention(q, k, v, scale=0.05, chunk=16)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, scale=0.05)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    assert (blocked_causal_attention(q, k, v, chunk=16) - ref).abs().max() > 1e-2


def test_bfloat16_is_as_close_to_float32_as_sdpa_in_bfloat16():
    q, k, v = _qkv(1, 9, 3, 300, 64)
    exact = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    bf = [t.bfloat16() for t in (q, k, v)]
    ours = blocked_causal_attention(*bf, chunk=128).float()
    sdpa = F.scaled_dot_product_attention(*bf, is_causal=True, enable_gqa=True).float()
    err, sdpa_err = ((x - exact).norm() / exact.norm() for x in (ours, sdpa))
    assert err < 0.01 and err < 2 * sdpa_err


def test_runs_where_it_is_faster_only():
    q = torch.zeros(1, 2, 4, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        assert runs_blocked(q) and not runs_blocked(q, causal=False) and not runs_blocked(q.float())
    assert not runs_blocked(q)  # a gradient: SDPA


def test_a_bfloat16_llama_runs_it_and_keeps_its_logits():
    from transformers import LlamaConfig, LlamaForCausalLM

    from posenc.models import from_hf_llama

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    hf = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 128, (2, 300))
    with torch.no_grad():
        exact = from_hf_llama(hf).eval()(ids)
        lm = from_hf_llama(hf.to(torch.bfloat16)).eval()
        assert lm.attention_backend == "blocked_causal"
        ours = lm(ids).float()
        lm.attention_backend = "sdpa"
        sdpa = lm(ids).float()
    err, sdpa_err = ((x - exact).norm() / exact.norm() for x in (ours, sdpa))
    assert err < 0.02 and err < 2 * sdpa_err
    lm.attention_backend = "blocked_causal"
    lm(ids[:, :16]).float().sum().backward()  # with a gradient it runs SDPA
    assert lm.blocks[0].attn.q.weight.grad is not None
    assert lm.float().attention_backend == "sdpa"


def test_bfloat16_token_losses_are_the_float32_log_softmax_of_its_logits():
    """The bf16 head writes its logits into one bf16 buffer and their log-softmax, in float32, into
    another: the losses equal cross-entropy over the bf16 logits taken to float32, in every chunking."""
    from posenc.models.lm import CausalLM
    from posenc.pe.rope import RoPE

    torch.manual_seed(0)
    lm = CausalLM(RoPE(16), vocab_size=50, d_model=32, n_layers=2, n_heads=2).eval().to(torch.bfloat16)
    idx, targets = torch.randint(0, 50, (2, 37)), torch.randint(0, 50, (2, 37))
    targets[0, 5] = -100  # IGNORE_INDEX scores 0
    with torch.no_grad():
        full = F.cross_entropy(lm(idx).float().transpose(1, 2), targets, reduction="none")
        for chunk in (1, 5, 37, 1000):
            losses = lm(idx, targets=targets, chunk=chunk)
            assert losses.dtype == torch.float32
            torch.testing.assert_close(losses, full, rtol=0, atol=1e-6)
