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
