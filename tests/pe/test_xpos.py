import math

import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.pe.rope import apply_rope, rope_angles, rope_inv_freq
from posenc.pe.xpos import XPos, xpos_scale, xpos_zeta


def scores(pe: XPos, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    q, k = pe.rotate_qk(q, k, pe.rotation(positions, torch.float32))
    return q @ k.transpose(-1, -2)  # (b, n_h, s, s)


def test_zeta_follows_the_paper():
    assert_close(xpos_zeta(8), torch.tensor([0.4, 0.65, 0.9, 1.15]) / 1.4)


def test_one_pair_product_is_rotation_times_scale_ratio():
    """q_n·k_m = cos((n − m)θ)·ζ^((n − m)/B) for q = k = (1, 0): rotation and decay by n − m only."""
    pe = XPos(head_dim=2, scale_base=16.0)
    pos = torch.tensor([0, 5, 37, 300])
    q = torch.tensor([1.0, 0.0]).expand(1, 1, 4, 2)
    got = scores(pe, q, q, pos)[0, 0]
    zeta = 0.4 / 1.4
    delta = (pos[:, None] - pos[None, :]).double()
    assert_close(got.double(), torch.cos(delta) * zeta ** (delta / 16.0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_scores_depend_on_offsets_only_and_match_the_uncentred_definition(layout):
    torch.manual_seed(0)
    pe = XPos(head_dim=16, layout=layout, scale_base=64.0)
    q, k = torch.randn(2, 3, 12, 16), torch.randn(2, 3, 12, 16)
    pos = torch.tensor([0, 1, 2, 4, 7, 11, 16, 22, 29, 37, 46, 56])
    base = scores(pe, q, k, pos)
    assert_close(scores(pe, q, k, pos + 37), base, rtol=1e-4, atol=1e-4)  # float32 angles: keep shifts small
    # the definition without centring: q scaled by ζ^(n/B), k by ζ^(−m/B), per rotation pair
    angles = rope_angles(pos, rope_inv_freq(16))
    zeta_n = xpos_zeta(16) ** (pos.float()[:, None] / 64.0)  # (s, r/2)
    qr = apply_rope(q, angles.cos() * zeta_n, angles.sin() * zeta_n, layout)
    kr = apply_rope(k, angles.cos() / zeta_n, angles.sin() / zeta_n, layout)
    assert_close(base, qr @ kr.transpose(-1, -2), rtol=1e-4, atol=1e-4)


def test_causal_scores_decay_with_distance_for_aligned_vectors():
    pe = XPos(head_dim=8, scale_base=32.0)
    pos = torch.arange(64)
    q = torch.zeros(1, 1, 64, 8)
    q[..., 0] = 1.0  # only the fastest-decaying pair, at angle 0 in the θ = 1 pair
    got = scores(pe, q, q, pos)[0, 0, 63]
    distance = (63 - pos).float()
    assert_close(got, torch.cos(distance) * (0.4 / 1.4) ** (distance / 32.0), rtol=1e-4, atol=1e-6)
    assert math.isclose(got[63].item(), 1.0, rel_tol=1e-6)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"head_dim": 7}, "even head dimension"),
        ({"head_dim": 8, "scale_base": 0.0}, "pe.scale_base"),
        ({"head_dim": 8, "base": 1.0}, "pe.base"),
    ],
)
def test_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        XPos(**kwargs)


# --- xPos is Rotary: every frequency scaling applies to it (posenc.pe.scaling) -------------------


def test_xpos_is_rotary_so_the_rotary_scales_apply():
    from posenc.pe.nope import NoPE
    from posenc.pe.rope import Rotary
    from posenc.pe.rope2d import RoPE2D
    from posenc.pe.scaling import NTK, PI, DynamicNTK, Llama3, LongRoPE, TableClamp, YaRN

    pe = XPos(head_dim=8)
    assert isinstance(pe, Rotary) and (pe.rot_dim, pe.base, pe.attention_scaling) == (8, 10000.0, 1.0)
    assert all(cls.applies(pe) for cls in (PI, NTK, DynamicNTK, YaRN, Llama3, LongRoPE))
    assert not TableClamp.applies(pe)
    assert not any(isinstance(other, Rotary) for other in (NoPE(), RoPE2D(head_dim=8, n_heads=2)))
    LongRoPE(short_factor=[1.0] * 4, long_factor=[2.0] * 4).check(pe)  # r/2 = 4 factors
    with pytest.raises(ConfigError, match="scale.short_factor has 3 factors, but the rotary dimension 8 has 4"):
        LongRoPE(short_factor=[1.0] * 3, long_factor=[2.0] * 3).check(pe)


def test_pi_rotates_by_the_angles_at_positions_over_s_and_keeps_the_decay_per_token():
    """PI on xPos: q_n·k_m = cos((n − m)θ/s)·ζ^((n − m)/B) for q = k = (1, 0), i.e. the rotation of
    positions n/s and the decay of the token distance n − m, as trained (the choice in xpos.py)."""
    from posenc.pe.scaling import PI

    pe = XPos(head_dim=2, scale_base=16.0)
    PI(factor=4.0).apply(pe, 512)
    pos = torch.tensor([0, 5, 37, 300])
    q = torch.tensor([1.0, 0.0]).expand(1, 1, 4, 2)
    got = scores(pe, q, q, pos)[0, 0]
    delta = (pos[:, None] - pos[None, :]).double()
    assert_close(got.double(), torch.cos(delta / 4) * (0.4 / 1.4) ** (delta / 16.0), rtol=1e-5, atol=1e-6)
    # every pair: the angles of positions n/s, the scales of positions n
    pe, plain = XPos(head_dim=16, scale_base=64.0), XPos(head_dim=16, scale_base=64.0)
    PI(factor=3.0).apply(pe, 96)
    pos = torch.arange(40)
    q_cos, q_sin, k_cos, k_sin = pe.rotation(pos, torch.float32)
    angles = rope_angles(pos / 3.0, plain.inv_freq)  # (s, r/2)
    decay = xpos_scale(pos, plain.zeta, 64.0)  # (s, r/2)
    assert_close(q_cos, angles.cos() * decay)
    assert_close(k_sin, angles.sin() / decay)
    # not xPos fed the positions n/s: that also slows the decay by s
    fed = plain.rotation(pos / 3.0, torch.float32)
    assert (fed[0] - q_cos).abs().max() > 1e-2


def test_ntk_changes_theta_on_xpos_exactly_as_on_rope():
    from posenc.pe.rope import RoPE
    from posenc.pe.scaling import NTK

    pe, rope = XPos(head_dim=16, base=500.0), RoPE(head_dim=16, base=500.0)
    for scheme in (pe, rope):
        NTK(factor=4.0).apply(scheme, 64)
    assert torch.equal(pe.inv_freq, rope.inv_freq)
    assert_close(pe.inv_freq, rope_inv_freq(16, 500.0 * 4.0 ** (16 / 14)))
    # the same as an xPos built with the NTK base
    torch.manual_seed(0)
    q, k, pos = torch.randn(1, 2, 24, 16), torch.randn(1, 2, 24, 16), torch.arange(24)
    assert_close(scores(pe, q, k, pos), scores(XPos(head_dim=16, base=500.0 * 4.0 ** (16 / 14)), q, k, pos))
    NTK(factor=4.0).apply(pe, 64)  # applied twice: from the trained θ again, the same frequencies
    assert torch.equal(pe.inv_freq, rope.inv_freq)


def test_yarn_temperature_on_xpos_scales_every_score_by_its_square():
    from posenc.pe.scaling import YaRN

    torch.manual_seed(0)
    pe, plain = XPos(head_dim=8), XPos(head_dim=8)
    YaRN(factor=4.0, beta_fast=1e9, beta_slow=1e9).apply(pe, 32)  # no ramp: only the temperature
    assert pe.attention_scaling == pytest.approx(0.1 * math.log(4.0) + 1)
    q, k, pos = torch.randn(1, 1, 6, 8), torch.randn(1, 1, 6, 8), torch.arange(6)
    assert_close(scores(pe, q, k, pos), scores(plain, q, k, pos) * pe.attention_scaling**2)


def test_set_frequencies_needs_one_per_pair():
    with pytest.raises(ConfigError, match="xpos expects 4 frequencies, got 3"):
        XPos(head_dim=8).set_frequencies(torch.ones(3))
