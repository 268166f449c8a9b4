import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.pe.base import randomized_positions
from posenc.pe.learned import LearnedPE
from posenc.pe.rope import RoPE


def test_positions_are_sorted_distinct_and_in_range():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        pos = randomized_positions(64, 100, generator=g)
        assert pos.shape == (64,) and pos.dtype == torch.long
        assert (pos.diff() > 0).all()  # sorted and distinct
        assert 0 <= int(pos.min()) and int(pos.max()) < 100
    assert torch.equal(randomized_positions(100, 100, generator=g), torch.arange(100))  # the whole range


def test_positions_are_seeded_and_spread_over_the_range():
    a = randomized_positions(32, 4096, generator=torch.Generator().manual_seed(1))
    b = randomized_positions(32, 4096, generator=torch.Generator().manual_seed(1))
    c = randomized_positions(32, 4096, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(5)
    d = randomized_positions(32, 4096)
    torch.manual_seed(5)
    assert torch.equal(d, randomized_positions(32, 4096))  # the global generator, seeded by a run
    assert int(a.max()) > 2048  # not 0..s-1: drawn from the whole range


def test_range_shorter_than_the_sequence_is_a_config_error():
    with pytest.raises(ConfigError, match="pe.randomized_max=16 must be >= the sequence length 32"):
        randomized_positions(32, 16)


def test_schemes_carry_the_settings():
    pe = RoPE(head_dim=8, randomized=True, randomized_max=512)
    assert pe.randomized and pe.randomized_max == 512
    assert not RoPE(head_dim=8).randomized
    with pytest.raises(ConfigError, match="pe.randomized_max must be >= 1"):
        RoPE(head_dim=8, randomized=True, randomized_max=0)


def test_learned_table_must_cover_the_range():
    LearnedPE(dim=4, max_len=512, randomized=True, randomized_max=512)
    LearnedPE(dim=4, max_len=128, randomized=False, randomized_max=2048)  # unused when off
    with pytest.raises(ConfigError, match="pe.randomized_max=2048 is past the LearnedPE table of 128 positions"):
        LearnedPE(dim=4, max_len=128, randomized=True, randomized_max=2048)
