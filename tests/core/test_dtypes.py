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


def test_bf16_on_a_cpu_without_bf16_matrix_instructions_is_named(tmp_path):
    from posenc.core.dtypes import cpu_flags, slow_dtype_line

    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n\nflags\t: avx512_bf16\n"
    )
    assert cpu_flags(str(info)) == {"fpu", "sse2", "avx", "avx2", "fma"}  # the first processor's
    assert cpu_flags(str(tmp_path / "none")) is None
    line = slow_dtype_line(torch.bfloat16, "cpu", {"avx2", "fma"})
    assert line is not None and "no bfloat16 matrix instructions" in line and "float32" in line
    for flags in ({"avx2", "avx512_bf16"}, {"avx2", "amx_bf16", "amx_tile"}):
        assert slow_dtype_line(torch.bfloat16, "cpu", flags) is None
    assert slow_dtype_line(torch.float32, "cpu", {"avx2"}) is None
    assert slow_dtype_line(None, "cpu", {"avx2"}) is None  # train.precision=fp32: no autocast
    assert slow_dtype_line(torch.bfloat16, "cuda", {"avx2"}) is None
    assert slow_dtype_line(torch.bfloat16, "cpu", {"neon", "bf16"}) is None  # not x86: not judged


@pytest.mark.parametrize("flags, shown", [({"avx2", "fma"}, True), ({"avx2", "avx512_bf16"}, False)])
def test_train_in_bf16_says_so_on_such_a_cpu_even_when_quiet(cli, tmp_path, monkeypatch, flags, shown):
    import posenc.core.dtypes

    monkeypatch.setattr(posenc.core.dtypes, "cpu_flags", lambda: flags)
    smoke = ["experiment=smoke", "train.steps=2", "train.eval_every=2", "train.log_every=1"]
    code, _, err = cli("train", "--results-dir", tmp_path, "-q", *smoke, "train.device=cpu", "train.precision=bf16")
    assert code == 0, err
    assert ("no bfloat16 matrix instructions" in err) is shown, err
    assert len(err.strip().splitlines()) == int(shown)
