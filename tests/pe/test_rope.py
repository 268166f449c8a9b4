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


def written_out(x, cos, sin, layout):
    """The rotation spelled out pair by pair: (a, b) -> (a·cos − b·sin, b·cos + a·sin)."""
    r = 2 * cos.shape[-1]
    if cos.dim() == 3:
        cos, sin = cos[:, None], sin[:, None]
    idx = torch.arange(r // 2)
    first, second = (idx, idx + r // 2) if layout == "half" else (2 * idx, 2 * idx + 1)
    out = x.clone()
    a, b = x[..., first], x[..., second]
    out[..., first], out[..., second] = a * cos - b * sin, b * cos + a * sin
    return out


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("fraction", [1.0, 0.5])
@pytest.mark.parametrize("batched", [False, True])
def test_apply_rope_and_its_gradients_equal_the_written_out_rotation(layout, fraction, batched):
    """The fast path (pair halves written into one output; backward the rotation by −θ) against
    the elementwise construction, values and gradients of x and of the tables (learned
    frequencies), on a transposed (b, n_h, s, h_d) view as the Q/K projection gives it."""
    g = torch.Generator().manual_seed(0)
    b, n_h, s, h_d = 2, 3, 5, 8
    r = int(h_d * fraction)
    proj = torch.randn(b, s, n_h * h_d, dtype=torch.float64, generator=g, requires_grad=True)
    table = (b, s, r // 2) if batched else (s, r // 2)
    cos = torch.randn(*table, dtype=torch.float64, generator=g, requires_grad=True)
    sin = torch.randn(*table, dtype=torch.float64, generator=g, requires_grad=True)
    grad = torch.randn(b, n_h, s, h_d, dtype=torch.float64, generator=g)

    def x():
        return proj.view(b, s, n_h, h_d).transpose(1, 2)  # (b, n_h, s, h_d), not contiguous

    ours = apply_rope(x(), cos, sin, layout)
    assert ours.stride() == x().stride()  # the projection's layout, for the matmuls downstream
    ours_grads = torch.autograd.grad(ours, (proj, cos, sin), grad)
    ref = written_out(x(), cos, sin, layout)
    ref_grads = torch.autograd.grad(ref, (proj, cos, sin), grad)
    assert_close(ours, ref, rtol=0, atol=1e-12)
    for mine, theirs in zip(ours_grads, ref_grads):
        assert_close(mine, theirs, rtol=0, atol=1e-12)
    with torch.no_grad():
        assert_close(apply_rope(x(), cos, sin, layout), ref, rtol=0, atol=1e-12)
    rotated = lambda p, c, s_: apply_rope(p.view(b, s, n_h, h_d).transpose(1, 2), c, s_, layout)  # noqa: E731
    assert torch.autograd.gradcheck(rotated, (proj, cos, sin))


def test_a_float32_table_rotates_bf16_queries_in_float32():
    x = torch.randn(1, 2, 4, 8).bfloat16()
    cos, sin = RoPE(head_dim=8).rotation(torch.arange(4), torch.float32)
    out = apply_rope(x.requires_grad_(), cos, sin)
    assert out.dtype == torch.float32
    assert_close(out, written_out(x.float(), cos, sin, "half"), rtol=0, atol=1e-6)
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert grad.dtype == torch.bfloat16
