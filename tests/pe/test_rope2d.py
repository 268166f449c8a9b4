"""2D RoPE: scores depend only on (Δrow, Δcol); norms kept; the cls token is never rotated."""

import math

import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.pe.grid import patch_positions
from posenc.pe.rope2d import RoPE2D, axial_frequencies


def scores(pe, q, k, positions):
    """(n_h, s, s) q·k after rotating q and k at ``positions`` (one prefix token in front)."""
    cos, sin = pe.rotation(positions, q.dtype)
    rq, rk = pe.rotate_qk(q, k, (cos, sin))
    return rq[0] @ rk[0].transpose(-1, -2)


@pytest.mark.parametrize("mode", ["axial", "mixed"])
def test_score_depends_only_on_row_and_column_offsets(mode):
    torch.manual_seed(0)
    pe = RoPE2D(head_dim=16, n_heads=2, mode=mode).double()
    pos = patch_positions((3, 4))  # (12, 2)
    v = torch.randn(1, 2, 1, 16, dtype=torch.float64)
    q = v.expand(1, 2, 12, 16)
    k = torch.randn(1, 2, 1, 16, dtype=torch.float64).expand(1, 2, 12, 16)
    base = scores(pe, q, k, pos)
    for shift in ([5, 0], [0, 7], [2, -3], [0.5, 1.25]):
        shifted = scores(pe, q, k, pos + torch.tensor(shift, dtype=torch.float64))
        torch.testing.assert_close(shifted, base, rtol=0, atol=1e-10)
    # and a pair's score is a function of its offset: (0,0)->(1,1) equals (1,2)->(2,3)
    i, j, i2, j2 = 0, 5, 6, 11
    torch.testing.assert_close(base[:, i, j], base[:, i2, j2], rtol=0, atol=1e-10)
    # it does change with the offset, so the test above can fail
    assert (base[:, 0, 1] - base[:, 0, 4]).abs().max() > 1e-3


@pytest.mark.parametrize("mode", ["axial", "mixed"])
def test_norms_kept_and_prefix_not_rotated(mode):
    torch.manual_seed(1)
    pe = RoPE2D(head_dim=8, n_heads=2, mode=mode)
    pos = patch_positions(3)
    q, k = torch.randn(2, 2, 1 + 9, 8), torch.randn(2, 2, 1 + 9, 8)  # one cls token in front
    rq, rk = pe.rotate_qk(q, k, pe.rotation(pos, q.dtype))
    assert torch.equal(rq[:, :, 0], q[:, :, 0]) and torch.equal(rk[:, :, 0], k[:, :, 0])
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    assert not torch.allclose(rq[:, :, 2:], q[:, :, 2:])


def test_axial_frequencies_and_layout():
    f = axial_frequencies(16, 100.0)
    torch.testing.assert_close(f, torch.tensor([1.0, 100**-0.25, 100**-0.5, 100**-0.75]))
    pe = RoPE2D(head_dim=16, n_heads=1)
    angles = pe.angles(torch.tensor([[2.0, 3.0]]))  # row 2, col 3
    torch.testing.assert_close(angles[0], torch.cat((3 * f, 2 * f)))  # columns first, then rows


def test_mixed_frequencies_are_learned_directions():
    torch.manual_seed(0)
    pe = RoPE2D(head_dim=8, n_heads=3, mode="mixed")
    assert pe.freqs.requires_grad and pe.freqs.shape == (2, 3, 4)
    mag = (pe.freqs[0] ** 2 + pe.freqs[1] ** 2).sqrt()  # |(f_x, f_y)| is RoPE-ViT's base-10 magnitude
    expected = axial_frequencies(8, 10.0).repeat(2)
    torch.testing.assert_close(mag, expected.expand(3, 4))
    q = torch.randn(1, 3, 4, 8)
    rq, rk = pe.rotate_qk(q, q, pe.rotation(patch_positions(2), q.dtype))
    (rq * rk.roll(1, dims=2)).sum().backward()
    assert pe.freqs.grad is not None and pe.freqs.grad.abs().sum() > 0
    assert math.isfinite(float(pe.freqs.grad.sum()))


def test_bad_configs():
    with pytest.raises(ConfigError, match="head dim divisible by 4"):
        RoPE2D(head_dim=6, n_heads=2)
    with pytest.raises(ConfigError, match="valid: axial, mixed"):
        RoPE2D(head_dim=8, n_heads=2, mode="spiral")
