"""A remap on a real checkpoint of a family that runs transformers' modules (a tiny Gemma 3 folder):
experiment=real scores the remapped global layers as the explicit construction does."""

from __future__ import annotations

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

from remap_reference import ReferenceRemap  # noqa: E402

from posenc.engine.config import compose  # noqa: E402
from posenc.engine.context import RunContext  # noqa: E402
from posenc.experiments.real import Real, documents, tokenize  # noqa: E402
from posenc.pe.remap.self_extend import SelfExtend  # noqa: E402


def test_gemma3_folder_with_self_extend_equals_the_construction(tmp_path):
    from hf_models import VOCAB, tiny_tokenizer

    from posenc.models import pretrained

    config = transformers.Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=32,
        sliding_window=6,
        layer_types=["sliding_attention", "full_attention"] * 2,
        query_pre_attn_scalar=24,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
        },
    )
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "gemma3")
    tokenizer = tiny_tokenizer()
    tokenizer.save_pretrained(tmp_path / "gemma3")
    cfg = compose(
        [
            "experiment=real",
            f"model.path='{tmp_path / 'gemma3'}'",
            "model.device=cpu",
            "real.lengths=[16,60]",
            "real.tail=8",
            "remap=self_extend",
            "remap.group=3",
            "remap.window=8",
        ]
    )
    result = Real().run(cfg, RunContext(tmp_path / "results"))
    table = result.table.set_index(["scale", "metric"])
    source = pretrained.resolve_source(str(tmp_path / "gemma3"))
    lm = pretrained.load_pretrained(source, pretrained.read_config(source)).lm
    tokens = tokenize(tokenizer, documents(None))[:60]
    lm.set_remap(ReferenceRemap(SelfExtend(group=3, window=8, original_length=32)))
    with torch.no_grad():
        losses = lm(tokens[None, :-1], targets=tokens[None, 1:])[0].double()
    assert table.loc[("none+self_extend", "ppl"), "60"] == pytest.approx(math.exp(float(losses.mean())), rel=1e-5)
