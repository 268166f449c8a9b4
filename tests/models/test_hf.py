import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from posenc.models import from_hf_llama  # noqa: E402
from posenc.pe.rope import RoPE  # noqa: E402

CONFIGS = [
    {},
    {"num_key_value_heads": 2},
    {"head_dim": 24, "tie_word_embeddings": False},
    {"rope_theta": 500000.0, "attention_bias": True, "mlp_bias": True, "num_hidden_layers": 3},
    {"hidden_size": 96, "num_attention_heads": 6, "num_key_value_heads": 1, "rms_norm_eps": 1e-6},
]


@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_logits_match_transformers(overrides):
    kwargs = dict(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        tie_word_embeddings=True,
    )
    kwargs.update(overrides)
    torch.manual_seed(0)
    reference = LlamaForCausalLM(LlamaConfig(**kwargs)).eval()
    ids = torch.randint(0, 97, (2, 70))
    ours = from_hf_llama(reference).eval()
    with torch.no_grad():
        assert_close(ours(ids), reference(ids).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("tied", [True, False])
def test_conversion_takes_the_models_tensors(tied):
    """Fails on the old conversion, which built a randomly initialised LM and copied the weights
    in: two full sets of weights at once (0.5 GB more peak RSS for SmolLM2-135M)."""
    torch.manual_seed(0)
    reference = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=97,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=tied,
        )
    ).eval()
    ours = from_hf_llama(reference)
    theirs = {t.data_ptr() for t in reference.state_dict().values()}
    assert all(p.data_ptr() in theirs for p in ours.parameters())
    assert ours.pe.inv_freq.device.type == "cpu" and ours.pe.inv_freq.dtype == torch.float32
    assert ours.attention_backend == "sdpa"  # built on the meta device, chosen again on the CPU
    assert ours.length_scale is None  # the default RoPE follows no length


def test_rope_matches_apply_rotary_pos_emb():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig(hidden_size=128, num_attention_heads=2, rope_theta=10000.0)
    q, k = torch.randn(2, 1, 2, 300, 64).unbind(0)
    pos = torch.arange(300)[None]
    cos, sin = LlamaRotaryEmbedding(config)(q, pos)
    ref_q, ref_k = apply_rotary_pos_emb(q, k, cos, sin)
    rope = RoPE(64)
    our_q, our_k = rope.rotate_qk(q, k, rope.rotation(pos[0], q.dtype))
    assert_close(our_q, ref_q, rtol=0, atol=1e-5)
    assert_close(our_k, ref_k, rtol=0, atol=1e-5)
