"""RoPE in some layers only (``pe.nope_layers``): those layers' attention sees no position at all."""

import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.models.lm import CausalLM
from posenc.pe.nope import NoPE
from posenc.pe.rope import RoPE


def lm(pe, seed=0, n_layers=3):
    torch.manual_seed(seed)
    model = CausalLM(pe, vocab_size=50, d_model=32, n_layers=n_layers, n_heads=2).eval()
    with torch.no_grad():  # larger weights than the 0.02 init, so positions move the outputs
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
    return model


def block_outputs(model, idx, positions):
    seen = []
    hooks = [b.register_forward_hook(lambda m, i, out: seen.append(out)) for b in model.blocks]
    with torch.no_grad():
        model(idx, positions=positions)
    for h in hooks:
        h.remove()
    return seen


def test_rope_in_no_layer_is_nope():
    idx = torch.randint(0, 50, (2, 40))
    ours, nope = lm(RoPE(16, nope_layers=[0, 1, 2])), lm(NoPE())
    nope.load_state_dict(ours.state_dict())
    with torch.no_grad():
        assert_close(ours(idx), nope(idx), rtol=0, atol=0)


def test_a_layer_without_rope_ignores_positions_the_others_see():
    """Positions stretched by 3 (not a shift, which RoPE cannot see either): the first layer's output
    is unchanged where it has no RoPE and changes where it has; later layers change in both."""
    idx = torch.randint(0, 50, (1, 40))
    plain, stretched = torch.arange(40), 3 * torch.arange(40)
    without = lm(RoPE(16, nope_layers=[0]))
    a, b = block_outputs(without, idx, plain), block_outputs(without, idx, stretched)
    assert_close(a[0], b[0], rtol=0, atol=0)
    assert (a[1] - b[1]).abs().max() > 1e-2
    rotated = lm(RoPE(16))
    c, d = block_outputs(rotated, idx, plain), block_outputs(rotated, idx, stretched)
    assert (c[0] - d[0]).abs().max() > 1e-2
    # the first layer's output depends on its own setting only, not on which other layers lose RoPE
    assert_close(a[0], block_outputs(lm(RoPE(16, nope_layers=[0, 2])), idx, plain)[0], rtol=0, atol=0)


def test_only_the_named_layers_lose_rope():
    """nope_layers=[2] of 3: the first two layers' outputs equal the full-RoPE model's exactly, the third's differ."""
    idx = torch.randint(0, 50, (1, 30))
    some, every = lm(RoPE(16, nope_layers=[2])), lm(RoPE(16))
    a, b = block_outputs(some, idx, torch.arange(30)), block_outputs(every, idx, torch.arange(30))
    assert_close(a[0], b[0], rtol=0, atol=0)
    assert_close(a[1], b[1], rtol=0, atol=0)
    assert (a[2] - b[2]).abs().max() > 1e-2


def test_the_config_option_builds_and_a_layer_past_the_model_is_refused():
    from posenc.engine.build import build
    from posenc.engine.config import compose

    model = build(compose(["pe=rope", "pe.nope_layers=[3]"])).model
    assert model.pe.nope_layers == (3,) and len(model.blocks) == 4
    assert build(compose(["pe=rope"])).model.pe.nope_layers == ()
    with pytest.raises(ConfigError, match=r"pe.nope_layers=\[4\] names layers past the model's 4 \(valid: 0..3\)"):
        build(compose(["pe=rope", "pe.nope_layers=[4]"]))
    with pytest.raises(ConfigError, match="pe.nope_layers are layer indices >= 0"):
        RoPE(16, nope_layers=[-1])
