"""A posenc LM saved as a Hugging Face checkpoint (``save_hf_llama``): transformers loads it back
with the same logits, its rescaling carried by config.json."""

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import AutoModelForCausalLM  # noqa: E402

from posenc.models.hf import from_hf_llama, llama_config_for, save_hf_llama, to_hf_llama_state  # noqa: E402
from posenc.pe.scaling import NTK, PI, DynamicNTK, Llama3, LongRoPE, NoScale, YaRN  # noqa: E402

LENGTH = 48  # evaluated past the tiny model's 16-token original context
SCALES = {
    "none": NoScale(),
    "pi": PI(factor=3.0, original_length=16),
    "ntk": NTK(factor=3.0, original_length=16),
    "yarn": YaRN(factor=3.0, original_length=16, beta_fast=16.0),
    "dynamic": DynamicNTK(factor=1.0, original_length=16),
    "llama3": Llama3(factor=3.0, original_length=16),
    "longrope": LongRoPE(  # r = 16: 8 factors each; past 16 tokens the long ones
        original_length=16,
        max_position=LENGTH,
        short_factor=[1.0 + 0.1 * i for i in range(8)],
        long_factor=[1.0 + 0.5 * i for i in range(8)],
    ),
}


@pytest.fixture(scope="module")
def tokenizer():
    from hf_models import tiny_tokenizer

    return tiny_tokenizer()


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("name", list(SCALES))
def test_saved_checkpoint_loads_in_transformers_with_the_same_logits(tmp_path, tokenizer, name, tied):
    from hf_models import tiny_llama

    hf = tiny_llama(tied, max_positions=16)  # GQA: 4 heads over 2 key/value heads
    lm = from_hf_llama(hf)
    scale = SCALES[name]
    scale.apply(lm.pe, LENGTH)
    config = llama_config_for(hf.config, scale, lm.pe.rot_dim, LENGTH)
    folder = save_hf_llama(lm, config, tokenizer, tmp_path / "ft")
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= {p.name for p in folder.iterdir()}
    written = json.loads((folder / "config.json").read_text())
    assert "max_position" not in written["rope_parameters"]  # posenc's name; Hugging Face's is max_position_embeddings
    assert written["rope_scaling"] == (
        None if name in ("none", "ntk") else {k: v for k, v in written["rope_parameters"].items() if k != "rope_theta"}
    )
    back = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    assert back.config.tie_word_embeddings == tied
    idx = torch.randint(0, hf.config.vocab_size, (2, LENGTH), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = lm(idx)
        torch.testing.assert_close(back(idx).logits, ours, rtol=0, atol=1e-5)
        if name != "none":  # the rescaling is what config.json carries: the shipped RoPE differs
            assert (hf(idx).logits - ours).abs().max() > 1e-3
        reloaded = from_hf_llama(back)  # and posenc reads the same scale back from it
        torch.testing.assert_close(reloaded(idx), ours, rtol=0, atol=1e-5)


def test_state_names_are_transformers_own(tmp_path):
    from hf_models import tiny_llama

    for tied in (True, False):
        hf = tiny_llama(tied)
        theirs = {k for k in hf.state_dict() if not (tied and k == "lm_head.weight")}
        assert set(to_hf_llama_state(from_hf_llama(hf))) == theirs


def test_pi_on_a_shipped_linear_scaling_saves_one_linear_factor(tmp_path, tokenizer):
    from hf_models import tiny_llama

    from posenc.core.errors import ConfigError

    hf = tiny_llama(True, max_positions=16, rope_scaling={"rope_type": "linear", "factor": 2.0})
    lm = from_hf_llama(hf)
    lm.pe.set_frequencies(lm.pe.inv_freq / 1.5)  # PI x1.5 on top (experiments.real.Model.install)
    config = llama_config_for(hf.config, PI(factor=1.5, original_length=16), lm.pe.rot_dim, LENGTH)
    assert config.rope_parameters["rope_type"] == "linear" and config.rope_parameters["factor"] == 3.0
    back = AutoModelForCausalLM.from_pretrained(save_hf_llama(lm, config, tokenizer, tmp_path / "ft")).eval()
    idx = torch.randint(0, hf.config.vocab_size, (1, LENGTH), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(back(idx).logits, lm(idx), rtol=0, atol=1e-5)
    with pytest.raises(ConfigError, match="cannot describe 'YaRN' on top of the shipped rope_type 'linear'"):
        llama_config_for(hf.config, SCALES["yarn"], lm.pe.rot_dim, LENGTH)
