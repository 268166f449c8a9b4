import pytest
import torch

from posenc.pe import PositionOutOfRange
from posenc.pe.learned import LearnedPE


def test_table_rows_by_position_and_error_past_the_table():
    pe = LearnedPE(dim=4, max_len=10)
    pos = torch.tensor([[0, 3, 9]])
    assert torch.equal(pe.embedding(pos), pe.table[pos])
    with pytest.raises(PositionOutOfRange, match="position 10 is past .* 10 positions"):
        pe.embedding(torch.arange(11))


def test_resample_grows_the_table_in_place_through_resample_table():
    from posenc.pe.resample import resample_table

    torch.manual_seed(0)
    pe = LearnedPE(dim=4, max_len=5)
    old = pe.table.detach().clone()
    pe.resample_(5)  # covered already: the same parameter, untouched
    param = pe.table
    pe.resample_(3, "clamp")
    assert pe.table is param and pe.max_positions == 5
    pe.resample_(9, "linear")
    assert isinstance(pe.table, torch.nn.Parameter) and pe.table.requires_grad
    assert torch.equal(pe.table.detach(), resample_table(old, 9, "linear")) and pe.max_positions == 9
    assert torch.equal(pe.embedding(torch.tensor([8])), pe.table[8:9])
    # the frozen numbers of the interpolation: row m reads the old table at m·5/9
    torch.testing.assert_close(pe.table[1].detach(), old[0] * (4 / 9) + old[1] * (5 / 9))


def test_resample_grid_treats_the_rows_as_prefix_plus_raster_patches():
    from posenc.pe.resample import resample_grid

    torch.manual_seed(0)
    pe = LearnedPE(dim=4, max_len=1 + 9 + 3)  # cls row, a 3x3 grid, 3 rows past it
    old = pe.table.detach().clone()
    pe.resample_grid_((3, 3), old_grid=(3, 3))  # the same grid: nothing changes
    assert torch.equal(pe.table.detach(), old) and pe.max_positions == 13
    pe.resample_grid_((4, 5), old_grid=(3, 3), num_prefix_tokens=1, mode="bilinear")
    assert pe.max_positions == 1 + 20 and pe.table.shape == (21, 4)
    expected = resample_grid(old[:10], (4, 5), old_grid=(3, 3), num_prefix_tokens=1, mode="bilinear")
    assert torch.equal(pe.table.detach(), expected) and torch.equal(pe.table[0].detach(), old[0])


def test_resample_with_an_unknown_mode_names_the_valid_ones():
    from posenc.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown table resampling 'cubic'; valid: clamp, linear"):
        LearnedPE(dim=4, max_len=5).resample_(9, "cubic")
