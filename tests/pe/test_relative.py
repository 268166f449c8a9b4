import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.pe.relative import RelativeBiasPE, clipped_distance


def test_clipped_distance_rows():
    pos = torch.arange(6)
    rows = clipped_distance(pos, pos, max_distance=2)
    assert rows[5].tolist() == [4, 4, 4, 4, 3, 2]  # i − j = 5, 4, 3, 2 clip to K=2; row = clip + K
    assert rows[0].tolist() == [2, 1, 0, 0, 0, 0]


def test_bias_reads_one_scalar_per_head_and_clipped_distance():
    torch.manual_seed(0)
    pe = RelativeBiasPE(n_heads=3, max_distance=4)
    pos = torch.arange(10)
    bias = pe.bias(pos, pos)  # (n_h, s, s)
    assert bias.shape == (3, 10, 10)
    for i, j in [(9, 0), (9, 5), (9, 8), (2, 7), (3, 3)]:
        row = max(-4, min(4, i - j)) + 4
        assert_close(bias[:, i, j], pe.table[row])
    assert_close(bias[:, 9, 0], bias[:, 9, 5])  # both past K
    assert not torch.allclose(bias[:, 9, 5], bias[:, 9, 6])


def test_negative_max_distance_is_a_config_error():
    with pytest.raises(ConfigError, match="pe.max_distance must be >= 0, got -1"):
        RelativeBiasPE(n_heads=2, max_distance=-1)
