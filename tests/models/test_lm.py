import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.models.lm import CausalLM
from posenc.pe.learned import LearnedPE
from posenc.pe.nope import NoPE
from posenc.pe.rope import RoPE
from posenc.pe.sinusoidal import SinusoidalPE

SCHEMES = {
    "nope": lambda: NoPE(),
    "learned": lambda: LearnedPE(dim=32, max_len=64),
    "sinusoidal": lambda: SinusoidalPE(dim=32),
    "rope": lambda: RoPE(head_dim=8),
}


def tiny(pe, **kw):
    return CausalLM(pe, vocab_size=50, d_model=32, n_layers=2, n_heads=4, mlp_hidden=48, **kw).eval()


@pytest.mark.parametrize("name", SCHEMES)
def test_changing_token_t_never_changes_logits_before_t(name):
    model = tiny(SCHEMES[name]())
    x = torch.randint(0, 50, (2, 24))
    t = 13
    y = x.clone()
    y[:, t] = (y[:, t] + 1) % 50
    with torch.no_grad():
        a, b = model(x), model(y)
    assert torch.equal(a[:, :t], b[:, :t])
    assert (a[:, t:] - b[:, t:]).abs().max() > 1e-4


def test_positions_reach_the_scheme():
    model = tiny(RoPE(head_dim=8))
    x = torch.randint(0, 50, (1, 10))
    with torch.no_grad():
        default = model(x)
        explicit = model(x, torch.arange(10))
        shifted = model(x, torch.arange(10) + 5)
    assert torch.equal(default, explicit)
    # RoPE is relative: a common shift of every position changes nothing but rounding
    assert_close(default, shifted, rtol=0, atol=1e-4)
    model = tiny(LearnedPE(dim=32, max_len=64))
    with torch.no_grad():
        assert (model(x) - model(x, torch.arange(10) + 5)).abs().max() > 1e-4


def test_grouped_query_attention_and_untied_head():
    model = tiny(RoPE(head_dim=8), n_kv_heads=2, tie_embeddings=False)
    assert model.blocks[0].attn.k.weight.shape == (16, 32)
    assert model(torch.randint(0, 50, (3, 7))).shape == (3, 7, 50)


def test_shape_mistakes_are_config_errors():
    with pytest.raises(ConfigError, match="d_model=30 is not divisible by model.n_heads=4"):
        CausalLM(NoPE(), d_model=30, n_heads=4)
    with pytest.raises(ConfigError, match="n_heads=4 is not divisible by model.n_kv_heads=3"):
        CausalLM(NoPE(), d_model=32, n_heads=4, n_kv_heads=3)
    with pytest.raises(ConfigError, match="2D scheme"):
        CausalLM(NoPE(ndim=2), d_model=32, n_heads=4)


def test_attention_backend_is_chosen_when_built_and_named():
    from posenc.pe.alibi import AlibiPE
    from posenc.pe.t5 import T5BiasPE

    assert tiny(RoPE(head_dim=8)).attention_backend == tiny(NoPE()).attention_backend == "sdpa"
    alibi = tiny(AlibiPE(n_heads=4))
    assert alibi.attention_backend == "sdpa_key_bias"
    alibi.bias_chunk = 8  # chunks asked for: the relative form, built per chunk
    assert alibi.attention_backend == "sdpa_bias"
    alibi.bias_chunk = None
    assert alibi.attention_backend == "sdpa_key_bias"
    assert tiny(AlibiPE(n_heads=4), causal=False).attention_backend == "sdpa_bias"
    assert tiny(T5BiasPE(n_heads=4)).attention_backend == "sdpa_bias"


def test_moving_the_model_chooses_the_attention_of_its_new_device(monkeypatch):
    """``select_attention`` runs again on ``.to()``: here a stand-in picks 'flex' on the meta device."""
    import posenc.models.lm as lm_module
    from posenc.models.blocks import select_attention
    from posenc.pe.t5 import T5BiasPE

    seen = []

    def spy(pe, device, causal, bias_chunk=None, dtype=torch.float32):
        seen.append(device.type)
        return "flex" if device.type == "meta" else select_attention(pe, device, causal, bias_chunk, dtype)

    monkeypatch.setattr(lm_module, "select_attention", spy)
    model = tiny(T5BiasPE(n_heads=4))
    assert model.attention_backend == "sdpa_bias" and seen == ["cpu"]
    model.to("meta")
    assert model.attention_backend == "flex" and seen[-1] == "meta"


def test_a_length_scale_is_applied_at_each_forward_for_its_length_and_can_be_cleared():
    """``follow_length``: the logits at each length equal those of the scale applied for that
    length by hand; nothing carries over to a later, shorter pass; None stops it."""
    from posenc.pe.scaling import DynamicNTK

    torch.manual_seed(0)
    model = tiny(RoPE(head_dim=8))
    fixed = tiny(RoPE(head_dim=8))
    fixed.load_state_dict(model.state_dict())
    scale = DynamicNTK(original_length=8)
    model.follow_length(scale)
    assert model.length_scale is scale
    idx = torch.randint(0, 50, (2, 40))
    with torch.no_grad():
        for length in (40, 6, 24):
            scale.apply(fixed.pe, length)
            assert_close(model(idx[:, :length]), fixed(idx[:, :length]), rtol=0, atol=0)
        scale.apply(fixed.pe, 30)  # explicit positions: the length is the largest position + 1
        assert_close(model(idx[:, :10], torch.arange(20, 30)), fixed(idx[:, :10], torch.arange(20, 30)))
        model.follow_length(None)
        installed = model.pe.inv_freq.clone()
        model(idx)  # no scale: the frequencies stay as they are
    assert model.length_scale is None and torch.equal(model.pe.inv_freq, installed)
    assert not torch.equal(installed, RoPE(head_dim=8).inv_freq)  # 30 > 8: the NTK base, kept
