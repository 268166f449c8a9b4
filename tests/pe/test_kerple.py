import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.pe.kerple import KerpleLogPE


def test_bias_is_minus_r1_log_one_plus_r2_distance():
    pe = KerpleLogPE(n_heads=2)
    with torch.no_grad():
        pe.r1.copy_(torch.tensor([1.5, 0.5]))
        pe.r2.copy_(torch.tensor([0.25, 2.0]))
    pos = torch.arange(4)
    bias = pe.bias(pos, pos)
    assert bias[0, 3].tolist() == pytest.approx(
        [
            -1.5 * torch.log1p(torch.tensor(0.75)).item(),
            -1.5 * torch.log1p(torch.tensor(0.5)).item(),
            -1.5 * torch.log1p(torch.tensor(0.25)).item(),
            0.0,
        ]
    )
    assert_close(bias[1, 2, 0], -0.5 * torch.log1p(torch.tensor(4.0)))


def test_parameters_below_eps_keep_their_gradient_and_the_step_hook_clamps_their_data():
    """Fails on the old behaviour (a clamp in the forward pass): r1 = −3 read as eps, and its
    gradient was zero."""
    pe = KerpleLogPE(n_heads=2, eps=0.01)
    with torch.no_grad():
        pe.r1.copy_(torch.tensor([-3.0, 1.0]))
        pe.r2.copy_(torch.tensor([1.0, 0.001]))
    pos = torch.arange(5)
    bias = pe.bias(pos, pos)
    assert_close(bias[0, 4, 0], 3.0 * torch.log1p(torch.tensor(4.0)))  # read as it is
    bias.sum().backward()
    assert pe.r1.grad[0] != 0 and pe.r2.grad[1] != 0
    pe.after_optimizer_step()
    assert pe.r1.tolist() == pytest.approx([0.01, 1.0]) and pe.r2.tolist() == pytest.approx([1.0, 0.01])
    assert pe.r1.grad is not None  # the clamp is outside autograd: the gradient is untouched


def test_initial_parameters_are_at_least_eps():
    torch.manual_seed(0)
    pe = KerpleLogPE(n_heads=2000, eps=0.01)
    r1, r2 = pe.r1.detach(), pe.r2.detach()
    assert bool((r1 >= 0.01).all() and (r2 >= 0.01).all())
    assert 5 < int((r2 == 0.01).sum()) < 40  # about 1% of the U(0, 1) draws were below eps


def test_eps_must_be_positive():
    with pytest.raises(ConfigError, match="pe.eps"):
        KerpleLogPE(n_heads=2, eps=0.0)
