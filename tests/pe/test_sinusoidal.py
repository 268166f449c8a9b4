import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.pe.sinusoidal import SinusoidalPE, shift_matrix, sinusoidal_table


def fit_shift(delta, positions, dim=8):
    """Least-squares M with PE(pos + Δ) ≈ M PE(pos) over the given positions."""
    a = sinusoidal_table(positions, dim)  # (n, d)
    b = sinusoidal_table(positions + delta, dim)
    return torch.linalg.lstsq(a, b).solution.T  # (d, d)


def test_values_match_the_paper():
    pe = sinusoidal_table(torch.tensor([0, 1, 7]), 4, 10000.0)
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [
                torch.sin(torch.tensor(1.0)),
                torch.cos(torch.tensor(1.0)),
                torch.sin(torch.tensor(0.01)),
                torch.cos(torch.tensor(0.01)),
            ],
            [
                torch.sin(torch.tensor(7.0)),
                torch.cos(torch.tensor(7.0)),
                torch.sin(torch.tensor(0.07)),
                torch.cos(torch.tensor(0.07)),
            ],
        ],
        dtype=torch.float64,
    )
    assert_close(pe, expected, rtol=0, atol=1e-7)


@pytest.mark.parametrize("delta", [1, 5, 37])
def test_shift_is_a_linear_map_independent_of_position(delta):
    # every frequency must turn through enough angle over the fitted positions to identify M
    low = fit_shift(delta, torch.arange(0, 8000, 3))
    high = fit_shift(delta, torch.arange(50_000, 58_000, 3))
    assert_close(low, high, rtol=0, atol=1e-8)
    assert_close(low, shift_matrix(delta, 8), rtol=0, atol=1e-8)
    closed = shift_matrix(delta, 32)
    pos = torch.arange(0, 3000, 7)
    assert_close(sinusoidal_table(pos, 32) @ closed.T, sinusoidal_table(pos + delta, 32), rtol=0, atol=1e-9)


def test_module_adds_a_table_defined_everywhere():
    pe = SinusoidalPE(dim=8)
    assert pe.max_positions is None
    assert pe.embedding(torch.arange(100_000)).shape == (100_000, 8)
    with pytest.raises(ConfigError, match="even"):
        SinusoidalPE(dim=7)
