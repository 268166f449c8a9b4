"""Scales: which schemes they apply to, and what they do to a trained scheme."""

import torch

from posenc.models.lm import CausalLM
from posenc.pe.learned import LearnedPE
from posenc.pe.nope import NoPE
from posenc.pe.rope import RoPE
from posenc.pe.scaling import PI, NoScale, TableClamp, TableInterpolate, YaRN, clamp_table, interpolate_table
from posenc.pe.sinusoidal import SinusoidalPE


def test_each_scale_applies_to_its_schemes_only():
    rope, learned, others = RoPE(head_dim=8), LearnedPE(dim=8, max_len=4), [NoPE(), SinusoidalPE(dim=8)]
    assert all(NoScale.applies(pe) for pe in [rope, learned, *others])
    assert PI.applies(rope) and YaRN.applies(rope) and not any(PI.applies(pe) for pe in [learned, *others])
    assert TableClamp.applies(learned) and TableInterpolate.applies(learned)
    assert not any(TableClamp.applies(pe) for pe in [rope, *others])


def test_table_resampling():
    table = torch.arange(8.0).view(4, 2)  # rows (0,1) (2,3) (4,5) (6,7)
    assert torch.equal(clamp_table(table, 6)[4:], torch.tensor([[6.0, 7.0], [6.0, 7.0]]))
    assert clamp_table(table, 3) is table
    # row m of the new table reads the old one at m * 4/8: halfway rows are averages
    expected = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [6, 7]], dtype=torch.float32)
    torch.testing.assert_close(interpolate_table(table, 8), expected)
    assert interpolate_table(table, 4) is table


def test_table_scales_let_a_learned_model_run_past_its_table():
    torch.manual_seed(0)
    model = CausalLM(LearnedPE(dim=16, max_len=8), vocab_size=11, d_model=16, n_layers=1, n_heads=2)
    idx = torch.randint(0, 11, (1, 16))
    short = model(idx[:, :8])
    TableInterpolate().apply(model.pe, 16)
    assert model.pe.table.shape == (16, 16) and model.pe.max_positions == 16
    assert model(idx).shape == (1, 16, 11)
    TableClamp().apply(model.pe, 4)  # shorter: unchanged
    assert model.pe.table.shape == (16, 16)
    torch.testing.assert_close(model(idx[:, :1]), short[:, :1])  # row 0 is kept


def test_pi_on_frequencies_equals_interpolated_positions():
    """Scaling the frequencies by 1/s is the same model as feeding positions m/s."""
    torch.manual_seed(0)
    model = CausalLM(RoPE(head_dim=8), vocab_size=11, d_model=16, n_layers=2, n_heads=2)
    idx = torch.randint(0, 11, (2, 24))
    reference = model(idx, torch.arange(24) / 3.0)
    PI(factor=3.0).apply(model.pe, 24)
    torch.testing.assert_close(model(idx), reference, rtol=1e-5, atol=1e-5)


def test_yarn_attention_factor_scales_the_rotated_queries_and_keys():
    rope = RoPE(head_dim=8)
    YaRN(factor=4.0, beta_fast=1e9, beta_slow=1e9).apply(rope, 32)  # no ramp: every dim extrapolated
    q = torch.randn(1, 1, 5, 8)
    plain = RoPE(head_dim=8)
    rq, _ = rope.rotate_qk(q, q, rope.rotation(torch.arange(5), torch.float32))
    pq, _ = plain.rotate_qk(q, q, plain.rotation(torch.arange(5), torch.float32))
    torch.testing.assert_close(rq, pq * (0.1 * torch.log(torch.tensor(4.0)) + 1))
