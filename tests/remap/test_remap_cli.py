"""``posenc extrapolate --remap …`` end to end, ``posenc list remap``, and bad input: one line,
exit 2, nothing written."""

from __future__ import annotations

import pandas as pd
import pytest

TINY = ["experiment=smoke", "train.steps=4", "train.seq_len=16", "eval.max_windows=4"]


def test_list_shows_every_remap(cli):
    code, out, err = cli("list", "remap")
    assert code == 0, err
    for name in ("none", "self_extend", "rerope", "leaky_rerope", "sinks", "dual_chunk"):
        assert f" {name} " in out, out


def test_extrapolate_with_a_remap_on_top_of_each_scale(cli, tmp_path):
    args = ["--pe", "rope", "--scale", "none,yarn", "--lengths", "16,48", "--results-dir", str(tmp_path), "-q"]
    code, out, err = cli("extrapolate", *args, *TINY, "--remap", "self_extend", "remap.group=4", "remap.window=8")
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    table = pd.read_csv(run / "table.csv")
    # the model as trained first, as the unscaled row is beside every scale
    assert list(dict.fromkeys(table.scale)) == ["none", "none+self_extend", "yarn+self_extend"]
    assert table[["16", "48"]].notna().all().all()
    assert len(list((tmp_path / "cache").iterdir())) == 1  # one training: the remap is no training setting
    bpb = table[table.metric == "bpb"].set_index("scale")["48"]
    assert bpb["none"] != bpb["none+self_extend"]
    # the same model scored without the remap in a run of its own gives the baseline row's numbers
    code, _, err = cli("extrapolate", *args, *TINY)
    assert code == 0, err
    [plain] = [r for r in (tmp_path / "runs").iterdir() if r != run]
    alone = pd.read_csv(plain / "table.csv").set_index(["scale", "metric"])
    assert alone.loc[("none", "bpb"), "48"] == pytest.approx(bpb["none"], rel=1e-9)
    assert len(list((tmp_path / "cache").iterdir())) == 1


@pytest.mark.parametrize(
    "args,message",
    [
        (["--remap", "bogus"], "unknown remap 'bogus'; valid:"),
        (["--remap", "self_extend", "remap.group=0"], "remap.group must be >= 1, got 0"),
        (["--remap", "self_extend", "remap.window=0"], "remap.window must be >= 1, got 0"),
        (["--remap", "self_extend", "remap.window=17"], "remap.window=17 is larger than the trained context 16"),
        (
            ["--remap", "self_extend", "remap.window=12", "--lengths", "8,12"],
            "remap.window = 12 is not below the longest evaluated length 12",
        ),
        (["--remap", "rerope", "remap.window=20"], "remap.window=20 is larger than the trained context 16"),
        (["--remap", "leaky_rerope", "remap.k=1"], "remap.k must be > 1"),
        (["--remap", "sinks", "remap.n_sink=-1"], "remap.n_sink must be >= 0, got -1"),
        (["--remap", "sinks", "remap.window=16"], "remap.n_sink + remap.window = 4 + 16 is larger than the trained"),
        (["--remap", "dual_chunk", "remap.chunk_size=32"], "remap.chunk_size=32 is larger than the trained context"),
        (
            ["--remap", "dual_chunk", "remap.chunk_size=8", "remap.local_window=8"],
            "remap.local_window=8 must be below remap.chunk_size=8",
        ),
        (
            ["--pe", "alibi", "--remap", "self_extend"],
            "remap 'self_extend' remaps the positions of RoPE (pe=rope); pe 'alibi' (AlibiPE) is not one",
        ),
        (
            ["--pe", "nope", "--remap", "rerope"],
            "remap 'rerope' remaps the positions of RoPE (pe=rope); pe 'nope' (NoPE) is not one",
        ),
        (["--pe", "learned", "--remap", "sinks"], "pe 'learned' (LearnedPE) is not one"),
        (["--pe", "xpos", "--remap", "dual_chunk"], "pe 'xpos' (XPos) is not one"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(cli, tmp_path, args, message):
    code, out, err = cli("extrapolate", "--results-dir", tmp_path / "out", "-q", *TINY, *args)
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_a_sweep_job_checks_its_remap_before_any_work():
    """``posenc sweep experiment=extrapolation remap=…`` plans each job through the protocol's
    check: a remap that cannot work is refused there, one that can plans its cells as scale+remap."""
    from posenc.core.errors import ConfigError
    from posenc.engine.config import compose
    from posenc.experiments.extrapolation.protocol import Extrapolation, job_plan

    base = ["experiment=extrapolation", "pe=rope", "train.seq_len=16", "extrapolation.scales=[none,yarn]"]
    with pytest.raises(ConfigError, match="remap.window = 16 is not below the longest evaluated length 16"):
        Extrapolation().check(compose([*base, "extrapolation.lengths=[8,16]", "remap=rerope", "remap.window=16"]))
    with pytest.raises(ConfigError, match="remap 'sinks' remaps the positions of RoPE"):
        Extrapolation().check(compose([*base[:1], "pe=alibi", *base[2:], "remap=sinks"]))
    _, cfgs, _ = job_plan(compose([*base, "extrapolation.lengths=[16,64]", "remap=dual_chunk"]))
    assert [c.choices.scale for c in cfgs] == ["none", "yarn"] and {c.choices.remap for c in cfgs} == {"dual_chunk"}
