"""scale=proportional (p-RoPE): the slowest pairs stop rotating, as transformers' ``proportional`` rope type."""

import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.engine.config import compose, instantiate
from posenc.pe.rope import RoPE
from posenc.pe.scaling import Proportional


def scale(*overrides):
    cfg = compose(["pe=rope", "scale=proportional", *overrides])
    return instantiate(cfg.scale, "scale")


def test_the_option_matches_transformers_proportional_rope():
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    ours = scale("scale.partial_rotary_factor=0.5", "scale.factor=2.0")
    assert isinstance(ours, Proportional)
    rope = RoPE(16, base=500.0)
    ours.check(rope)
    ours.apply(rope, 64)
    config = transformers.LlamaConfig(
        hidden_size=64,
        num_attention_heads=4,
        head_dim=16,
        rope_parameters={"rope_type": "proportional", "rope_theta": 500.0, "factor": 2.0, "partial_rotary_factor": 0.5},
    )
    inv_freq, attention = ROPE_INIT_FUNCTIONS["proportional"](config, None)
    assert_close(rope.inv_freq, inv_freq, rtol=1e-6, atol=0)
    assert rope.attention_scaling == attention == 1.0
    assert bool((rope.inv_freq[4:] == 0).all()) and bool((rope.inv_freq[:4] > 0).all())


def test_the_unrotated_pairs_ignore_position():
    """q·k over the pairs past the fraction is the same at every offset; the rotated pairs' is not."""
    rope = RoPE(16)
    scale("scale.partial_rotary_factor=0.75", "scale.factor=1.0").apply(rope, 32)
    q, k = torch.randn(2, 1, 1, 1, 16).unbind(0)
    dots = []
    for m in (0, 5, 300):
        qr, _ = rope.rotate_qk(q, q, rope.rotation(torch.tensor([m]), torch.float32))
        _, kr = rope.rotate_qk(k, k, rope.rotation(torch.tensor([0]), torch.float32))
        # half layout: pair i is (i, i + 8); pairs 6 and 7 do not rotate
        still = [6, 7, 14, 15]
        dots.append(((qr[..., still] * kr[..., still]).sum().item(), (qr * kr).sum().item()))
    assert dots[0][0] == pytest.approx(dots[1][0], abs=1e-6) == pytest.approx(dots[2][0], abs=1e-6)
    assert abs(dots[0][1] - dots[2][1]) > 1e-3


def test_factor_null_follows_the_length_as_pi():
    ours = scale("scale.partial_rotary_factor=1.0", "train.seq_len=16")
    rope = RoPE(16)
    full = rope.inv_freq.clone()
    ours.apply(rope, 64)
    assert_close(rope.inv_freq, full / 4, rtol=1e-6, atol=0)


def test_without_the_fraction_it_names_it():
    with pytest.raises(ConfigError, match=r"scale proportional needs scale.partial_rotary_factor in \(0, 1\]"):
        scale()
    with pytest.raises(ConfigError, match="got 1.5"):
        scale("scale.partial_rotary_factor=1.5")
