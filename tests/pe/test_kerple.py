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
    assert bias[0, 3].tolist() == pytest.approx([-1.5 * torch.log1p(torch.tensor(0.75)).item(),
                                                  -1.5 * torch.log1p(torch.tensor(0.5)).item(),
                                                  -1.5 * torch.log1p(torch.tensor(0.25)).item(), 0.0])
    assert_close(bias[1, 2, 0], -0.5 * torch.log1p(torch.tensor(4.0)))


def test_parameters_are_kept_positive_and_learn():
    pe = KerpleLogPE(n_heads=2, eps=0.01)
    with torch.no_grad():
        pe.r1.copy_(torch.tensor([-3.0, 1.0]))
        pe.r2.copy_(torch.tensor([1.0, -5.0]))
    pos = torch.arange(5)
    bias = pe.bias(pos, pos)
    assert_close(bias[0, 4, 0], -0.01 * torch.log1p(torch.tensor(4.0)))  # r1 clamped to eps
    assert_close(bias[1, 4, 0], -1.0 * torch.log1p(torch.tensor(0.04)))  # r2 clamped to eps
    bias.sum().backward()
    assert pe.r1.grad[1] != 0 and pe.r2.grad[0] != 0


def test_eps_must_be_positive():
    with pytest.raises(ConfigError, match="pe.eps"):
        KerpleLogPE(n_heads=2, eps=0.0)
