"""Every RoPE family on tiny random transformers models: posenc's logits and token losses equal
transformers' (float32) under every scaling the family takes."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

from packaging.version import Version  # noqa: E402

from posenc.core.errors import ConfigError  # noqa: E402
from posenc.models.families import FAMILIES, InjectedLM, describe_rope, family_of  # noqa: E402

HF_VERSION = Version(transformers.__version__)
VOCAB, MAX_POS, HEAD_DIM, ORIGINAL = 101, 32, 16, 8
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=HEAD_DIM,
    max_position_embeddings=MAX_POS,
    tie_word_embeddings=False,
)
ALTERNATING = ["sliding_attention", "full_attention"] * 2
# family -> (config class, its own settings, rotary fraction)
FAMILY_CONFIGS = {
    "mistral": ("MistralConfig", {"sliding_window": 6}, 1.0),
    "qwen2": ("Qwen2Config", {"use_sliding_window": True, "sliding_window": 6, "max_window_layers": 2}, 1.0),
    "qwen3": ("Qwen3Config", {}, 1.0),
    "phi3": ("Phi3Config", {"original_max_position_embeddings": ORIGINAL, "pad_token_id": 0}, 1.0),
    "gemma2": (
        "Gemma2Config",
        {
            "sliding_window": 6,
            "layer_types": ALTERNATING,
            "attn_logit_softcapping": 5.0,
            "final_logit_softcapping": 3.0,
            "query_pre_attn_scalar": 24,
            "tie_word_embeddings": True,
        },
        1.0,
    ),
    "gemma3_text": (
        "Gemma3TextConfig",
        {"sliding_window": 6, "layer_types": ALTERNATING, "query_pre_attn_scalar": 24, "tie_word_embeddings": True},
        1.0,
    ),
    "olmo2": ("Olmo2Config", {}, 1.0),
    "gpt_neox": ("GPTNeoXConfig", {"rope_parameters": {"partial_rotary_factor": 0.25}}, 0.25),
    "smollm3": ("SmolLM3Config", {"no_rope_layers": [1, 1, 0, 1], "pad_token_id": 0}, 1.0),
}
GLOBAL_THETA, LOCAL_THETA = 1000.0, 50.0


def scalings(rot_dim):
    half = rot_dim // 2
    return {
        "default": {},
        "linear": {"factor": 4.0},
        "dynamic": {"factor": 2.0},
        "yarn": {"factor": 4.0, "original_max_position_embeddings": ORIGINAL, "beta_fast": 16.0, "beta_slow": 1.0},
        "llama3": {
            "factor": 8.0,
            "original_max_position_embeddings": ORIGINAL,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
        "longrope": {
            "factor": MAX_POS / ORIGINAL,
            "original_max_position_embeddings": ORIGINAL,
            "short_factor": [1.0 + 0.1 * i for i in range(half)],
            "long_factor": [1.0 + 0.5 * i for i in range(half)],
        },
    }


def takes(family, rope_type):
    return family != "phi3" or rope_type in ("default", "longrope")  # Phi-3's config takes only these


def tiny(family, rope_type="default", seed=0):
    name, own, fraction = FAMILY_CONFIGS[family]
    rot_dim = int(HEAD_DIM * fraction)
    params = {"rope_type": rope_type, "rope_theta": GLOBAL_THETA, **scalings(rot_dim)[rope_type]}
    kwargs = {**COMMON, **own}
    params.update(kwargs.pop("rope_parameters", {}))
    if family == "gemma3_text":  # the scaling on the global layers, the local ones at their own θ
        params = {"full_attention": params, "sliding_attention": {"rope_type": "default", "rope_theta": LOCAL_THETA}}
    if family == "gpt_neox":
        kwargs.pop("num_key_value_heads"), kwargs.pop("head_dim")
    config = getattr(transformers, name)(**kwargs, rope_parameters=params, attn_implementation="eager")
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def references(hf, lengths, seed=1):
    """(ids, transformers' logits) per length, computed before conversion changes ``hf``'s rotary."""
    out = []
    for length in lengths:
        ids = torch.randint(0, VOCAB, (2, length), generator=torch.Generator().manual_seed(seed + length))
        with torch.no_grad():
            out.append((ids, hf(ids).logits))
    return out


CASES = [(f, t) for f in FAMILY_CONFIGS for t in scalings(16) if takes(f, t)]


@pytest.mark.parametrize(("family", "rope_type"), CASES, ids=[f"{f}-{t}" for f, t in CASES])
def test_logits_and_losses_match_transformers(family, rope_type):
    if (family, rope_type) == ("gemma3_text", "longrope") and HF_VERSION < Version("5.21"):
        # transformers' own reference: before 5.21 its LongRoPE update of a rotary with rope
        # parameters per layer type (Gemma 3's) fails on its second long input (UnboundLocalError)
        pytest.skip(f"transformers {transformers.__version__} computes no per-layer-type LongRoPE reference")
    hf = tiny(family, rope_type)
    # within the original context, then past max_position_embeddings (dynamic NTK and LongRoPE switch)
    refs = references(hf, [7, 24, 3 * MAX_POS + 5])
    ours = family_of(hf.config).convert(hf).eval()
    assert isinstance(ours, InjectedLM)
    for ids, logits in refs:
        with torch.no_grad():
            assert_close(ours(ids), logits, rtol=1e-4, atol=1e-5)
            # the same length as the logits': dynamic NTK's frequencies depend on it
            targets = torch.cat((ids[:, 1:], torch.full((2, 1), -100)), dim=1)
            losses = ours(ids, targets=targets, chunk=5)
            assert_close(ours(ids, last=3), logits[:, -3:], rtol=1e-4, atol=1e-5)
        expected = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        assert_close(losses[:, :-1], expected, rtol=1e-4, atol=1e-5)
        assert bool((losses[:, -1] == 0).all())


def test_every_family_has_a_tiny_model():
    assert set(FAMILIES) == {"llama", *FAMILY_CONFIGS}


def test_conversion_keeps_transformers_tensors():
    hf = tiny("qwen2")
    theirs = {t.data_ptr() for t in hf.state_dict().values()}
    ours = family_of(hf.config).convert(hf)
    assert {p.data_ptr() for p in ours.parameters()} <= theirs


def test_gemma3_scales_global_layers_only_by_default():
    hf = tiny("gemma3_text", "linear")
    ours = family_of(hf.config).convert(hf)
    assert ours.scaled_layer_type == "full_attention"
    assert ours.pe is ours.ropes["full_attention"] and ours.pe.base == GLOBAL_THETA
    local = ours.ropes["sliding_attention"]
    assert local.base == LOCAL_THETA
    assert_close(local.inv_freq, 1 / LOCAL_THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    assert_close(ours.pe.inv_freq, 1 / GLOBAL_THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM) / 4.0)
    assert describe_rope(hf.config) == (
        "full_attention: θ = 1000, rope_type linear; sliding_attention: θ = 50, rope_type default"
    )


def test_a_scale_installed_on_the_local_layers_moves_only_them():
    """Asked for, the scaling acts on the local layers: their frequencies change, the global ones keep theirs."""
    hf = tiny("gemma3_text")
    ref = copy.deepcopy(hf)
    ours = InjectedLM(hf, scaled_layer_type="sliding_attention")
    ours.pe.set_frequencies(ours.pe.inv_freq / 2)
    globals_before = ref.model.rotary_emb.full_attention_inv_freq
    assert_close(ours.ropes["full_attention"].inv_freq, globals_before)
    assert_close(ours.ropes["sliding_attention"].inv_freq, ref.model.rotary_emb.sliding_attention_inv_freq / 2)


def test_a_layer_type_the_model_has_not_is_refused():
    hf = tiny("gemma3_text")
    valid = "valid: full_attention, sliding_attention"
    with pytest.raises(ConfigError, match=f"no layer type 'chunked_attention' to scale; {valid}"):
        InjectedLM(hf, scaled_layer_type="chunked_attention")
    with pytest.raises(ConfigError, match="'qwen3' has one RoPE for every layer"):
        InjectedLM(tiny("qwen3"), scaled_layer_type="full_attention")


def test_unsupported_family_names_its_type_and_the_supported_list():
    config = transformers.FalconConfig()
    with pytest.raises(ConfigError, match=r"model_type 'falcon' is not supported; supported: llama \(Llama"):
        family_of(config)


def test_longrope_factors_of_the_wrong_length_are_refused():
    hf = tiny("qwen3", "longrope")
    hf.config.rope_parameters["long_factor"] = [1.0, 2.0]
    with pytest.raises(ConfigError, match="long_factor has 2 factors, but the rotary dimension 16 has 8 frequencies"):
        family_of(hf.config).convert(hf)


def test_a_saved_folder_loads_through_the_real_model_path(tmp_path):
    """A tiny Gemma 3 folder with a tokenizer: ``--model``'s checks pass, the loaded model scores
    the tokens as transformers does."""
    pytest.importorskip("tokenizers")
    from hf_models import tiny_tokenizer

    from posenc.models import pretrained

    hf = tiny("gemma3_text", "yarn")
    hf.save_pretrained(tmp_path)
    tiny_tokenizer().save_pretrained(tmp_path)
    source = pretrained.resolve_source(str(tmp_path))
    loaded = pretrained.load_pretrained(source, pretrained.read_config(source))
    assert isinstance(loaded.lm, InjectedLM) and loaded.original_length == ORIGINAL
    [(ids, logits)] = references(hf, [40])
    targets = torch.cat((ids[:, 1:], torch.full((2, 1), -100)), dim=1)
    with torch.no_grad():
        losses = loaded.lm(ids, targets=targets)
    expected = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    assert_close(losses[:, :-1], expected, rtol=1e-4, atol=1e-5)


def posenc_scales():
    from posenc.pe.scaling import PI, DynamicNTK, Llama3, YaRN

    params = scalings(HEAD_DIM)
    return {
        "linear": PI(factor=4.0, original_length=MAX_POS),
        "dynamic": DynamicNTK(factor=2.0, original_length=MAX_POS),
        "yarn": YaRN(factor=4.0, original_length=ORIGINAL, beta_fast=16.0, beta_slow=1.0),
        "llama3": Llama3(
            factor=8.0,
            original_length=ORIGINAL,
            **{k: params["llama3"][k] for k in ("low_freq_factor", "high_freq_factor")},
        ),
    }


ON_TOP = [(f, t) for f in ("qwen2", "gemma2", "gemma3_text", "olmo2", "smollm3") for t in posenc_scales()]


@pytest.mark.parametrize(("family", "rope_type"), ON_TOP, ids=[f"{f}-{t}" for f, t in ON_TOP])
def test_a_posenc_scale_on_the_shipped_model_equals_transformers_with_that_scaling(family, rope_type):
    """``posenc extrapolate``'s way: the model as shipped, posenc's scale installed on ``pe`` (Gemma 3:
    its global layers), against transformers' model of the same weights whose config ships the scaling."""
    shipped, scaled = tiny(family), tiny(family, rope_type)
    assert all(torch.equal(a, b) for a, b in zip(shipped.state_dict().values(), scaled.state_dict().values()))
    refs = references(scaled, [24, 3 * MAX_POS + 5])
    ours = family_of(shipped.config).convert(shipped).eval()
    scale = posenc_scales()[rope_type]
    for ids, logits in refs:
        if scale.length_dependent:
            ours.follow_length(scale)
        else:
            scale.apply(ours.pe, ids.shape[1])
        with torch.no_grad():
            assert_close(ours(ids), logits, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", ["mistral", "qwen2", "gemma2", "gemma3_text", "phi3"])
def test_banded_attention_in_blocks_equals_transformers(family, monkeypatch):
    """Blocks of 5 queries against their window's keys (6) or, soft-capped, every earlier key:
    the same logits as transformers' eager attention over a full mask."""
    from posenc.models import families

    monkeypatch.setattr(families, "BAND_CHUNK", 5)
    hf = tiny(family)
    if family == "phi3":
        hf.config.sliding_window = 7  # Phi-3 mini ships one (2047); its attention reads it from the config
    [(ids, logits)] = references(hf, [43])
    ours = family_of(hf.config).convert(hf).eval()
    assert hf.config._attn_implementation == families.BANDED  # transformers builds no (s, s) mask for it
    with torch.no_grad():
        assert_close(ours(ids), logits, rtol=1e-4, atol=1e-5)


def test_banded_attention_builds_no_full_mask():
    """A sliding-window layer's peak memory is a block of (chunk, chunk + w) scores, not (s, s):
    the largest tensor banded_attention's SDPA calls see at 4k tokens is 1024 x 1029 keys."""
    from posenc.models import families

    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kwargs):
        seen.append(tuple(attn_mask.shape) if attn_mask is not None else None)
        return real(q, k, v, attn_mask=attn_mask, **kwargs)

    q = torch.randn(1, 2, 4096, 8)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(families.F, "scaled_dot_product_attention", spy)
        out, _ = families.banded_attention(None, q, q[:, :1], q[:, :1], None, sliding_window=6)
    assert out.shape == (1, 4096, 2, 8)
    assert seen[0] == (1024, 1024) and max(n * e for n, e in seen) == 1024 * 1029
