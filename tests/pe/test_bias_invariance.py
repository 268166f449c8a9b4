"""Every relative bias scheme: shift the query and key positions together, the bias is the same."""

import pytest
import torch
from torch.testing import assert_close

from posenc.pe.alibi import AlibiPE
from posenc.pe.fire import FirePE
from posenc.pe.kerple import KerpleLogPE
from posenc.pe.relative import RelativeBiasPE
from posenc.pe.t5 import T5BiasPE

SCHEMES = {
    "relative": lambda: RelativeBiasPE(n_heads=3, max_distance=5),
    "t5": lambda: T5BiasPE(n_heads=3, num_buckets=16, max_distance=30),
    "t5_bidirectional": lambda: T5BiasPE(n_heads=3, num_buckets=16, max_distance=30, bidirectional=True),
    "alibi": lambda: AlibiPE(n_heads=3),
    "kerple": lambda: KerpleLogPE(n_heads=3),
    # FIRE normalises by max(i, L): relative only while every query stays below its threshold L
    "fire": lambda: FirePE(n_heads=3, init_threshold=4096.0),
}


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_bias_depends_only_on_offset(name):
    torch.manual_seed(0)
    pe = SCHEMES[name]()
    pos = torch.tensor([0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89])
    bias = pe.bias(pos, pos)  # (n_h, s, s)
    assert bias.shape == (3, 11, 11)
    for shift in (1, 17, 1000):
        assert_close(pe.bias(pos + shift, pos + shift), bias)
    # a (b, s) batch of positions gives a (b, n_h, s, s) bias, row by row the same
    batched = pe.bias(torch.stack((pos, pos + 123)), torch.stack((pos, pos + 123)))
    assert batched.shape == (2, 3, 11, 11)
    assert_close(batched[1], bias)
    # and it does depend on the offset (a test that cannot fail is no test)
    assert not torch.allclose(bias[:, 10, 10], bias[:, 10, 0])


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_distance_bias_holds_the_bias_of_each_distance(name):
    """``distance_bias`` entry i − j + s − 1 is bias[…, i, j] exactly, for shifted and batched positions."""
    torch.manual_seed(0)
    pe = SCHEMES[name]()
    s = 20
    i = torch.arange(s)
    for positions in (i, i + 1000, torch.stack((i, i + 7))):
        table = pe.distance_bias(positions)
        assert table.shape == (3, 2 * s - 1)
        bias = pe.bias(positions, positions)
        assert_close(table[:, i[:, None] - i[None, :] + s - 1].expand_as(bias), bias, rtol=1e-6, atol=1e-7)
    for positions in (torch.tensor([0, 1, 2, 4]), torch.arange(4).float(), torch.tensor([3, 2, 1, 0])):
        assert pe.distance_bias(positions) is None  # not a step of 1: no Toeplitz bias
