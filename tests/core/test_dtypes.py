"""One set of dtype spellings for train.precision and --dtype / model.dtype: short or long."""

import pytest
import torch

from posenc.core.dtypes import dtype_name, spellings, torch_dtype
from posenc.core.errors import ConfigError
from posenc.engine.training import PRECISIONS, TrainConfig
from posenc.models.pretrained import check_dtype


@pytest.mark.parametrize(
    "short, long, dtype",
    [("fp32", "float32", torch.float32), ("bf16", "bfloat16", torch.bfloat16), ("fp16", "float16", torch.float16)],
)
def test_both_spellings_name_one_dtype_in_both_places(short, long, dtype):
    assert dtype_name(short, "x") == dtype_name(long, "x") == long
    assert torch_dtype(short, "x") is torch_dtype(long, "x") is dtype
    assert check_dtype(short) is check_dtype(long) is dtype  # a real model's weights
    assert TrainConfig(precision=long).precision == TrainConfig(precision=short).precision == short
    assert PRECISIONS[TrainConfig(precision=long).precision] == (None if short == "fp32" else dtype)


def test_an_unknown_spelling_names_the_key_and_every_spelling():
    assert spellings() == ["fp32", "float32", "bf16", "bfloat16", "fp16", "float16"]
    with pytest.raises(ConfigError) as info:
        check_dtype("int8")
    assert str(info.value) == "--dtype 'int8' is not one of: fp32, float32, bf16, bfloat16, fp16, float16"
