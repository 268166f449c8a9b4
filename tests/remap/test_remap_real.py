"""Remaps on real models (experiment=real): a tiny random Llama checkpoint scored with a remap on
top of each scale equals the explicit construction; bad settings are one line, exit 2."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

pytest.importorskip("transformers")

from remap_reference import ReferenceRemap  # noqa: E402

from posenc.engine.config import compose  # noqa: E402
from posenc.engine.context import RunContext  # noqa: E402
from posenc.experiments.real import Real, build_remap  # noqa: E402
from posenc.pe.remap.self_extend import SelfExtend  # noqa: E402


def test_real_model_with_self_extend_equals_the_construction(real_models, tmp_path):
    from transformers import AutoTokenizer

    from posenc.experiments.real import documents, tokenize
    from posenc.models.hf import from_hf_llama

    folder = real_models["tied"]
    cfg = compose(
        [
            "experiment=real",
            f"model.path='{folder}'",
            "model.device=cpu",
            "real.lengths=[16,100]",
            "real.tail=24",
            "real.scales=[none,pi]",
            "remap=self_extend",
            "remap.group=2",
            "remap.window=16",
        ]
    )
    result = Real().run(cfg, RunContext(tmp_path))
    table = result.table.set_index(["scale", "metric"])
    assert list(dict.fromkeys(result.table.scale)) == ["none+self_extend", "pi+self_extend"]
    assert result.run.read_config()["remap"] == {"name": "SelfExtend", "group": 2, "window": 16, "original_length": 64}

    tokens = tokenize(AutoTokenizer.from_pretrained(folder), documents(None))[:100]
    lm = from_hf_llama(real_models["hf_tied"])
    lm.set_remap(ReferenceRemap(SelfExtend(group=2, window=16, original_length=64)))
    with torch.no_grad():
        losses = lm(tokens[None, :-1], targets=tokens[None, 1:])[0].double()
    assert table.loc[("none+self_extend", "ppl"), "100"] == pytest.approx(math.exp(float(losses.mean())), rel=1e-5)
    # up to the window every distance is exact: the 16-token column is the model as shipped
    lm.set_remap(None)
    with torch.no_grad():
        short = lm(tokens[None, :15], targets=tokens[None, 1:16])[0].double()
    assert table.loc[("none+self_extend", "ppl"), "16"] == pytest.approx(math.exp(float(short.mean())), rel=1e-5)
    assert not pd.isna(table.loc[("pi+self_extend", "ppl"), "100"])


def test_none_builds_on_any_family():
    none = {"_target_": "posenc.pe.remap.base.NoRemap"}
    assert not build_remap(
        "none", none, SimpleNamespace(model_type="gemma2", attn_logit_softcapping=50.0), 64, 100
    ).active


@pytest.mark.parametrize(
    "args,message",
    [
        (["--remap", "self_extend", "remap.window=80"], "remap.window=80 is larger than the trained context 64"),
        (
            ["--remap", "rerope", "remap.window=40", "--lengths", "16,40"],
            "remap.window = 40 is not below the longest evaluated length 40",
        ),
        (
            ["--remap", "sinks", "--finetune-steps", "1"],
            "real.finetune_steps with remap 'sinks': fine-tuning takes no remap",
        ),
    ],
)
def test_bad_input_on_a_real_model(cli, real_models, tmp_path, args, message):
    code, out, err = cli(
        "extrapolate", "--model", real_models["tied"], "--device", "cpu", "--results-dir", tmp_path / "out", *args
    )
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()
