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
