"""``from_hf_llama`` with every rescaled ``rope_type``: same logits as transformers in fp32."""

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from posenc.core.errors import ConfigError  # noqa: E402
from posenc.models.hf import from_hf_llama  # noqa: E402

MAX_POS = 32
HEAD_DIM = 16


def tiny_llama(rope_parameters, seed=0):
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=61,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POS,
        rope_parameters={"rope_theta": 500.0, **rope_parameters},
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    return LlamaForCausalLM(config).eval()


LONG = [1.0 + 0.5 * i for i in range(HEAD_DIM // 2)]
SHORT = [1.0 + 0.1 * i for i in range(HEAD_DIM // 2)]
PARAMETERS = {
    "linear": {"factor": 4.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 8, "beta_fast": 16.0, "beta_slow": 1.0},
    "yarn-mscale": {
        "factor": 4.0,
        "original_max_position_embeddings": 8,
        "mscale": 0.8,
        "mscale_all_dim": 0.5,
        "truncate": False,
    },
    "llama3": {"factor": 8.0, "original_max_position_embeddings": 8, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    "longrope": {"factor": 4.0, "original_max_position_embeddings": 8, "short_factor": SHORT, "long_factor": LONG},
}


def compare(hf, lm, length, seed=1):
    idx = torch.randint(0, 61, (2, length), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ref = hf(idx).logits
        ours = lm(idx)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(PARAMETERS))
def test_logits_match_transformers(name):
    hf = tiny_llama({"rope_type": name.split("-")[0], **PARAMETERS[name]})
    lm = from_hf_llama(hf)
    compare(hf, lm, 24)


@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_length_dependent_scales_follow_each_forward_pass(name):
    """Dynamic NTK past max_position_embeddings, LongRoPE past the original length: the
    frequencies change with the length, in transformers and in posenc alike."""
    hf = tiny_llama({"rope_type": name, **PARAMETERS[name]})
    lm = from_hf_llama(hf)
    assert type(lm.length_scale).__name__ == {"dynamic": "DynamicNTK", "longrope": "LongRoPE"}[name]
    compare(hf, lm, 6)  # within the original length
    compare(hf, lm, 3 * MAX_POS + 5)  # past it: recomputed
    before = lm.pe.inv_freq.clone()
    compare(hf, lm, 4 * MAX_POS)
    assert not torch.equal(before, lm.pe.inv_freq) or name == "longrope"


def test_proportional_rope_matches_transformers():
    hf = tiny_llama({"rope_type": "proportional", "factor": 2.0, "partial_rotary_factor": 0.5})
    compare(hf, from_hf_llama(hf), 20)


def test_unknown_rope_type_is_a_config_error():
    hf = tiny_llama({"rope_type": "linear", "factor": 2.0})
    hf.config.rope_parameters = {"rope_type": "mrope", "rope_theta": 500.0}
    with pytest.raises(ConfigError, match="rope_type 'mrope' is not supported; supported: default, linear"):
        from_hf_llama(hf)


def test_layer_types_are_the_rope_parameters_that_are_dicts():
    """transformers 5.9 writes a top-level rope_type and a null rope_theta beside Gemma 3's
    per-type dicts; the layer types (and each one's θ) are read from the dicts alone."""
    from types import SimpleNamespace

    from posenc.models.hf import rope_layer_types, rope_parameters

    per_type = {
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        "full_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 2.0},
    }
    for extra in ({}, {"rope_type": "default", "rope_theta": None}):
        config = SimpleNamespace(model_type="gemma3_text", rope_parameters={**per_type, **extra})
        assert rope_layer_types(config) == ("sliding_attention", "full_attention")
        assert rope_parameters(config)["rope_theta"] == 1e6  # the global layers by default
        assert rope_parameters(config, "sliding_attention")["rope_theta"] == 1e4
    flat = SimpleNamespace(model_type="llama", rope_parameters={"rope_type": "longrope", "short_factor": [1.0]})
    assert rope_layer_types(flat) == ()
