import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.pe.rope import RoPE, apply_rope, rope_angles, rope_inv_freq


def rotate(x, pos, layout="half", fraction=1.0, dtype=torch.float64):
    rope = RoPE(head_dim=x.shape[-1], layout=layout, rotary_fraction=fraction)
    cos, sin = rope.rotation(torch.as_tensor(pos).reshape(1), dtype)
    return apply_rope(x[None, None, None], cos, sin, layout)[0, 0, 0]


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_score_depends_only_on_offset(layout):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 64, dtype=torch.float64, generator=g)
    for offset in (0, 3, 17, 250):
        scores = [rotate(q, m, layout) @ rotate(k, m + offset, layout) for m in (0, 1, 40, 999, 4096)]
        spread = max(scores) - min(scores)
        assert spread < 1e-10, (offset, spread)
    # and it does depend on the offset
    assert abs(rotate(q, 0, layout) @ rotate(k, 1, layout) - rotate(q, 0, layout) @ rotate(k, 9, layout)) > 1e-3


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotation_preserves_norms(layout):
    x = torch.randn(2, 3, 50, 32, dtype=torch.float64)
    rope = RoPE(head_dim=32, layout=layout)
    q, k = rope.rotate_qk(x, x.flip(0), rope.rotation(torch.arange(50), torch.float64))
    assert_close(q.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=1e-12)
    assert_close(k.norm(dim=-1), x.flip(0).norm(dim=-1), rtol=1e-12, atol=1e-12)


def test_layouts_agree_after_fixed_permutation():
    d = 16
    x = torch.randn(1, 2, 9, d)
    # interleaved pairs (2i, 2i+1); half pairs (i, i + d/2): move dim 2i -> i and 2i+1 -> i + d/2
    perm = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))
    pos = torch.arange(9)
    inter = RoPE(d, layout="interleaved")
    half = RoPE(d, layout="half")
    a, _ = inter.rotate_qk(x, x, inter.rotation(pos, x.dtype))
    b, _ = half.rotate_qk(x[..., perm], x[..., perm], half.rotation(pos, x.dtype))
    assert_close(a[..., perm], b, rtol=0, atol=1e-6)


def test_partial_rotary_leaves_the_rest_untouched():
    x = torch.randn(1, 1, 5, 32)
    rope = RoPE(32, rotary_fraction=0.5)
    q, _ = rope.rotate_qk(x, x, rope.rotation(torch.arange(5), x.dtype))
    assert torch.equal(q[..., 16:], x[..., 16:])
    assert not torch.allclose(q[..., 1:, :16], x[..., 1:, :16])
    assert rope.inv_freq.shape == (8,)


def test_frequencies_and_table_cache():
    assert_close(rope_inv_freq(8, 10000.0), torch.tensor([1.0, 0.1, 0.01, 0.001]))
    rope = RoPE(8)
    cos, sin = rope.rotation(torch.arange(10), torch.float32)
    table = rope._tables[(torch.float32, torch.device("cpu"))]
    rope.rotation(torch.arange(6), torch.float32)
    assert rope._tables[(torch.float32, torch.device("cpu"))] is table  # reused, not recomputed
    angles = rope_angles(torch.arange(10), rope.inv_freq)
    assert_close(cos, angles.cos())
    assert_close(sin, angles.sin())
    # float positions take the direct path and agree with the table at integers
    cf, sf = rope.rotation(torch.arange(10).float(), torch.float32)
    assert_close(cf, cos)
    assert_close(sf, sin)
    # batched positions (b, s) broadcast over heads
    pos = torch.tensor([[0, 1, 2], [5, 6, 7]])
    q = torch.randn(2, 3, 3, 8)
    out, _ = rope.rotate_qk(q, q, rope.rotation(pos, q.dtype))
    ref, _ = rope.rotate_qk(q[1:], q[1:], rope.rotation(pos[1], q.dtype))
    assert_close(out[1:], ref)


@pytest.mark.parametrize("head_dim,fraction", [(15, 1.0), (16, 0.2), (7, 1.0)])
def test_odd_rotary_dimension_is_a_config_error(head_dim, fraction):
    with pytest.raises(ConfigError, match="even rotary dimension"):
        RoPE(head_dim, rotary_fraction=fraction)
