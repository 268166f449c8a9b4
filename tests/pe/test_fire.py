import math

import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.pe.fire import FirePE, fire_inputs, fire_mlp_segments


def test_inputs_are_log_distance_over_log_of_query_position_or_threshold():
    c, threshold = torch.tensor(0.1), torch.tensor(8.0)
    q = torch.tensor([2, 20])
    k = torch.tensor([0, 1, 2])
    x = fire_inputs(q, k, c, threshold)
    psi = lambda v: math.log(0.1 * v + 1)  # noqa: E731
    assert x[0].tolist() == pytest.approx([psi(2) / psi(8), psi(1) / psi(8), 0.0], rel=1e-5)
    assert x[1].tolist() == pytest.approx([psi(20) / psi(20), psi(19) / psi(20), psi(18) / psi(20)], rel=1e-5)


def test_bias_is_the_mlp_of_the_inputs():
    torch.manual_seed(0)
    pe = FirePE(n_heads=3, mlp_width=8, init_threshold=16.0)
    pos = torch.arange(30)
    bias = pe.bias(pos, pos)
    assert bias.shape == (3, 30, 30)
    x = fire_inputs(pos, pos, pe.c, torch.tensor(16.0))
    assert_close(bias, pe.mlp(x[..., None]).permute(2, 0, 1))


BATCH_POSITIONS = torch.stack((torch.arange(12), torch.arange(12) * 2 + 5))  # (b, s): one row per sequence


@pytest.mark.parametrize(
    "q, k",
    [
        (torch.arange(30), torch.arange(30)),
        (torch.tensor([3, 7, 8, 20]), torch.arange(25)),  # a chunk of queries against more keys
        (BATCH_POSITIONS, BATCH_POSITIONS),
    ],
)
def test_below_the_threshold_the_per_distance_mlp_equals_the_formula_values_and_gradients(q, k):
    torch.manual_seed(0)
    pe = FirePE(n_heads=3, mlp_width=8, init_threshold=64.0)  # every query below L
    bias = pe.bias(q, k)
    x = fire_inputs(q, k, pe.c, (pe.threshold_multiplier * pe.init_threshold).abs())
    formula = pe.mlp(x[..., None]).movedim(-1, -3)  # (…, n_h, s_q, s_k)
    assert bias.shape == formula.shape
    assert_close(bias, formula)
    weights = torch.randn_like(bias)
    params = list(pe.parameters())
    assert_close(
        torch.autograd.grad((bias * weights).sum(), params), torch.autograd.grad((formula * weights).sum(), params)
    )


def test_past_the_threshold_the_bias_depends_on_the_query_position():
    torch.manual_seed(0)
    pe = FirePE(n_heads=2, init_threshold=8.0)
    pos = torch.arange(20)
    shifted = pe.bias(pos + 100, pos + 100)
    assert not torch.allclose(pe.bias(pos, pos), shifted)  # normalised by max(i, L): not only i − j
    x = fire_inputs(pos + 100, pos + 100, pe.c, torch.tensor(8.0))
    assert x.diagonal().abs().max() == 0 and (x[19, :19].diff() < 0).all()  # closer keys: smaller input


@pytest.mark.parametrize("key", ["mlp_width", "init_c", "init_threshold"])
def test_bad_settings(key):
    with pytest.raises(ConfigError, match=f"pe.{key} must be > 0"):
        FirePE(n_heads=2, **{key: 0})


def test_distance_rows_equal_the_mlp_of_each_query_and_distance():
    """The piecewise-linear evaluation (fire_mlp_rows) against the MLP itself, past the threshold,
    at signed distances both sides, with knots spread over the inputs and a unit with w1 = 0."""
    torch.manual_seed(0)
    pe = FirePE(n_heads=3, mlp_width=16, init_threshold=16.0)
    with torch.no_grad():
        for p in pe.mlp.parameters():
            p.normal_()
        pe.mlp[0].weight[3] = 0.0
    q = torch.arange(10, 74)  # below and past L = 16
    d = torch.arange(-40, 300)
    rows = pe.distance_rows(q, d)  # (n_h, s_q, n)
    reference = torch.stack([pe.bias(q[r : r + 1], q[r : r + 1] - d)[:, 0] for r in range(len(q))], 1)
    assert rows.shape == reference.shape == (3, 64, 340)
    assert_close(rows, reference, rtol=1e-5, atol=1e-5)
    assert pe.distance_rows(q.float(), d) is None and pe.distance_rows(torch.stack((q, q)), d) is None


def test_segments_are_the_mlp_values_and_gradients():
    """fire_mlp_segments (knots, slope, intercept) evaluated by bucketize equals the MLP at inputs
    on both sides of every knot, and gives the MLP's gradients for its weights and its input."""
    torch.manual_seed(1)
    pe = FirePE(n_heads=3, mlp_width=16)
    with torch.no_grad():
        for p in pe.mlp.parameters():
            p.normal_()
        pe.mlp[0].weight[5] = 0.0  # a constant unit, no knot
    x = torch.linspace(-3, 3, 997, requires_grad=True)
    knots, slope, intercept = fire_mlp_segments(pe.mlp)
    j = torch.bucketize(x.detach(), knots)
    ours = intercept[:, j] + slope[:, j] * x  # (n_h, n)
    reference = pe.mlp(x[:, None]).T
    assert len(knots) == 15 and (knots.diff() >= 0).all()
    assert_close(ours, reference, rtol=1e-5, atol=1e-5)
    weights = torch.randn_like(ours)
    grads = [torch.autograd.grad((out * weights).sum(), [x, *pe.mlp.parameters()]) for out in (ours, reference)]
    for a, b in zip(*grads):
        assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_segments_kept_without_gradient_follow_a_change_of_the_weights():
    """The segments kept between calls without a gradient are rebuilt when a weight changes in
    place (an optimizer step): the rows after the change equal the MLP's, not the old ones."""
    torch.manual_seed(2)
    pe = FirePE(n_heads=2, mlp_width=8, init_threshold=16.0)
    q, d = torch.arange(20, 40), torch.arange(-5, 40)
    with torch.no_grad():
        before = pe.distance_rows(q, d)
        assert pe.segments() is pe.segments()  # kept
        pe.mlp[2].weight.mul_(2.0)
        after = pe.distance_rows(q, d)
    reference = torch.stack([pe.bias(q[r : r + 1], q[r : r + 1] - d)[:, 0] for r in range(len(q))], 1).detach()
    assert not torch.allclose(before, after)
    assert_close(after, reference, rtol=1e-5, atol=1e-5)
