import math

import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.pe.rope import apply_rope, rope_angles, rope_inv_freq
from posenc.pe.xpos import XPos, xpos_zeta


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
