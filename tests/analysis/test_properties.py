"""Each check passes on the real scheme and fails on a deliberately broken one."""

import pytest
import torch

from posenc.analysis import properties as P
from posenc.models.blocks import Attention
from posenc.pe.base import PositionScheme
from posenc.pe.rope import RoPE, apply_rope
from posenc.pe.sinusoidal import SinusoidalPE

F32, F64 = torch.float32, torch.float64


class SwappedPairSinusoidal(SinusoidalPE):
    """Rows 5 and 6 of the table swapped."""

    def embedding(self, positions):
        p = torch.where(positions == 5, 6, torch.where(positions == 6, 5, positions))
        return super().embedding(p)


class OffsetBugRoPE(RoPE):
    """A cache off-by-one: positions from 100 on are rotated one step too far."""

    def rotation(self, positions, dtype):
        return super().rotation(positions + (positions >= 100).long(), dtype)


class ScaledRoPE(RoPE):
    """cos and sin multiplied by 1.01: still relative, no longer a rotation."""

    def __init__(self, head_dim):
        super().__init__(head_dim)
        self.attention_scaling = 1.01


class OneFrequencyRoPE(RoPE):
    """θ_i = base^(−2i//d): integer division makes every frequency 1."""

    def __init__(self, head_dim):
        super().__init__(head_dim)
        self.inv_freq = torch.ones_like(self.inv_freq)


class AxialRoPE2D(PositionScheme):
    """Rows rotate the first half of each head, columns the second (RoPE-ViT axial)."""

    rotates_qk = True
    ndim = 2

    def __init__(self, head_dim, broken=False):
        super().__init__()
        self.rope, self.head_dim, self.broken = RoPE(head_dim // 2, base=100.0), head_dim, broken

    def rotation(self, positions, dtype):
        rows, cols = positions[..., 0], positions[..., 1]
        if self.broken:  # columns scaled by the row: depends on absolute position
            cols = cols * (1 + rows)
        return self.rope.rotation(rows, dtype), self.rope.rotation(cols, dtype)

    def rotate_qk(self, q, k, rotation):
        h = self.head_dim // 2
        (cr, sr), (cc, sc) = rotation
        f = lambda x: torch.cat((apply_rope(x[..., :h], cr, sr), apply_rope(x[..., h:], cc, sc)), -1)  # noqa: E731
        return f(q), f(k)


class DistanceBias(PositionScheme):
    """−slope·‖i − j‖₁ per head (ALiBi-like, symmetric, 1D or 2D); ``leak`` adds a term in i."""

    adds_bias = True

    def __init__(self, ndim=1, leak=0.0):
        super().__init__()
        self.ndim, self.leak = ndim, leak
        self.slopes = torch.tensor([0.5, 0.25])

    def bias(self, qp, kp):
        d = (qp[:, None] - kp[None, :]).reshape(len(qp), len(kp), -1).abs().sum(-1).float()
        i = qp.reshape(len(qp), -1)[:, :1].float()
        return -self.slopes[:, None, None] * d + self.leak * i


class RotatesValues(Attention):
    """An attention that (wrongly) rotates V with the keys' rotation."""

    def forward(self, x, pe, rotation=None, bias=None, causal=True):
        hook = self.v.register_forward_hook(
            lambda mod, args, out: _rotated(pe, rotation, out, self.n_kv_heads, self.head_dim)
        )
        try:
            return super().forward(x, pe, rotation, bias, causal)
        finally:
            hook.remove()


def _rotated(pe, rotation, v, n_heads, head_dim):
    b, s, _ = v.shape
    v = v.view(b, s, n_heads, head_dim).transpose(1, 2)
    _, v = pe.rotate_qk(v, v, rotation)
    return v.transpose(1, 2).reshape(b, s, n_heads * head_dim)


def test_c4_sinusoidal_shift_passes_and_a_swapped_pair_fails():
    deltas = [1, 7]
    good = P.shift_fit(SinusoidalPE(64), deltas)
    assert good.passed and good.measured < 1e-6
    bad = P.shift_fit(SwappedPairSinusoidal(64), deltas)
    assert not bad.passed and bad.measured > 1e-3


@pytest.mark.parametrize("rope", [RoPE(32), RoPE(32, layout="interleaved"), RoPE(32, rotary_fraction=0.5)])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_c9_rope_relative_invariance_and_norms_pass(rope, dtype):
    rel = P.relative_invariance(rope, 32, dtype, n=512)
    norm = P.norm_preservation(rope, 32, dtype, n=512)
    assert rel.passed and rel.measured < 1e-4
    assert norm.passed and norm.measured < 1e-6


@pytest.mark.parametrize("dtype", [F32, F64])
def test_c9_offset_bug_breaks_relative_invariance(dtype):
    bad = P.relative_invariance(OffsetBugRoPE(32), 32, dtype, n=512)
    assert not bad.passed and bad.measured > 1e-2


def test_c9_scaled_rotation_fails_norm_preservation():
    bad = P.norm_preservation(ScaledRoPE(32), 32, F32, n=256)
    assert not bad.passed and abs(bad.measured - (1.01**2 - 1)) < 1e-4  # ‖q‖ and ‖k‖ each × 1.01
    assert P.relative_invariance(ScaledRoPE(32), 32, F32, n=256).passed  # still relative: only the norm check sees it


def test_c9_values_untouched_passes_for_posenc_attention_and_fails_when_v_rotates():
    assert P.values_untouched(RoPE(16), 16).passed
    bad = P.values_untouched(RoPE(16), 16, attention=RotatesValues)
    assert not bad.passed and bad.measured > 1e-2


def test_c9_2d_rotation_depends_on_row_and_column_offsets_only():
    assert P.relative_invariance(AxialRoPE2D(32), 32, F32, top=64, n=512).passed
    bad = P.relative_invariance(AxialRoPE2D(32, broken=True), 32, F32, top=64, n=512)
    assert not bad.passed


@pytest.mark.parametrize("ndim", [1, 2])
def test_bias_depends_only_on_offset_and_a_leak_in_i_fails(ndim):
    good = P.bias_offset_only(DistanceBias(ndim))
    assert good.passed and good.measured == 0.0
    bad = P.bias_offset_only(DistanceBias(ndim, leak=0.01))
    assert not bad.passed and bad.measured > 1e-3


def test_bias_check_sees_a_mask_that_is_not_relative():
    class MaskedAbove10(DistanceBias):
        def bias(self, qp, kp):
            b = super().bias(qp, kp)
            b[..., 10, 3] = float("-inf")  # one entry masked, its offset-7 neighbours not
            return b

    assert not P.bias_offset_only(MaskedAbove10()).passed


@pytest.mark.parametrize("rope", [RoPE(32), RoPE(32, layout="interleaved", base=500.0)])
def test_rotation_frequencies_are_read_back_through_the_interface(rope):
    torch.testing.assert_close(P.rotation_frequencies(rope, 32), rope.inv_freq.double(), atol=1e-6, rtol=1e-5)


def test_c10_decay_and_periodicity_pass_for_rope_and_fail_with_one_frequency():
    assert P.long_term_decay(RoPE(64), 64).passed and P.periodicity(RoPE(64), 64).passed
    decay = P.long_term_decay(OneFrequencyRoPE(64), 64)
    assert not decay.passed and decay.measured > 0.99  # |S_j| = j at every distance: no decay
    period = P.periodicity(OneFrequencyRoPE(64), 64)
    assert not period.passed and period.measured < 0.05


def test_relative_upper_bound_matches_the_definition_at_zero():
    # at Δ = 0, S_j = j, so the bound is mean_j j = (d/2 + 1) / 2
    thetas = RoPE(128).inv_freq.double()
    assert P.relative_upper_bound(thetas, torch.tensor([0]))[0].item() == pytest.approx(32.5)
