"""Loading real checkpoints (folder, GGUF), float32 rotary frequencies under bf16, chunked loss."""

import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import UserError
from posenc.models.lm import CausalLM
from posenc.pe.rope import RoPE


def tiny_lm(tie: bool) -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(RoPE(16), vocab_size=50, d_model=32, n_layers=2, n_heads=2, tie_embeddings=tie).eval()


@pytest.mark.parametrize("tie", [True, False])
def test_chunked_cross_entropy_equals_full_logits(tie):
    lm = tiny_lm(tie)
    idx, targets = torch.randint(0, 50, (2, 37)), torch.randint(0, 50, (2, 37))
    targets[0, 5] = -100  # IGNORE_INDEX scores 0
    with torch.no_grad():
        full = torch.nn.functional.cross_entropy(lm(idx).transpose(1, 2), targets, reduction="none")
        for chunk in (1, 5, 37, 1000):  # without a gradient: one buffer, log-softmax in place
            assert_close(lm(idx, targets=targets, chunk=chunk), full, rtol=0, atol=1e-6)
    losses = lm(idx, targets=targets, chunk=5)  # with one: cross_entropy's own path
    assert losses.requires_grad
    assert_close(losses.detach(), full, rtol=0, atol=1e-6)


@pytest.mark.parametrize("pe", ["rope", "alibi"])
def test_loss_head_runs_the_asked_chunk(pe, monkeypatch):
    """Fails on the old forward: the attention's query chunk (the whole window for RoPE) replaced
    ``chunk``, so the head made full-vocabulary logits for the whole window (SmolLM2 at 12k
    tokens: 9.0 GB peak RSS, 2.4 GB of them logits and their log-softmax)."""
    import posenc.models.lm as lm_module
    from posenc.pe.alibi import AlibiPE

    scheme = RoPE(16) if pe == "rope" else AlibiPE(n_heads=2)
    lm = CausalLM(scheme, vocab_size=50, d_model=32, n_layers=1, n_heads=2, bias_chunk=64).eval()
    seen = []
    real = lm_module.chunked_cross_entropy
    monkeypatch.setattr(
        lm_module, "chunked_cross_entropy", lambda x, w, t, chunk: seen.append(chunk) or real(x, w, t, chunk)
    )
    idx = torch.randint(0, 50, (1, 300))
    with torch.no_grad():
        lm(idx, targets=idx, chunk=7)
    assert seen == [7]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_keeps_float32_frequencies(dtype):
    """Fails on the old RoPE: ``.to(torch.bfloat16)`` cast ``inv_freq`` too, moving every
    frequency by up to 0.4%."""
    lm = tiny_lm(True)
    reference = lm.pe.inv_freq.clone()
    lm.to(dtype)
    assert lm.pe.inv_freq.dtype == torch.float32
    assert torch.equal(lm.pe.inv_freq, reference)
    assert lm.embed.weight.dtype == dtype
    # cos/sin are computed from float32 angles, then cast once to the activations' dtype (as HF)
    cos, sin = lm.pe.rotation(torch.arange(3000), dtype)
    angles = torch.arange(3000).float()[:, None] * reference
    assert_close(cos, angles.cos().to(dtype), rtol=0, atol=0)
    lm.float()
    assert torch.equal(lm.pe.inv_freq, reference)


def test_bf16_logits_closer_to_float32_with_float32_frequencies():
    """The bf16 model with float32 frequencies tracks the float32 model better than one whose
    frequencies were rounded to bf16 (the old behaviour)."""
    lm = tiny_lm(True)
    idx = torch.randint(0, 50, (1, 2048))
    with torch.no_grad():
        exact = lm(idx)
        lm.to(torch.bfloat16)
        kept = (lm(idx).float() - exact).abs().mean()
        lm.pe.set_frequencies(lm.pe.inv_freq.bfloat16().float())
        rounded = (lm(idx).float() - exact).abs().mean()
    assert kept < rounded


@pytest.mark.parametrize("kind", ["tied", "untied", "gguf"])
def test_loads_with_transformers_logits(real_models, kind):
    from posenc.models import pretrained

    source = pretrained.resolve_source(str(real_models[kind]))
    assert source.kind == ("gguf" if kind == "gguf" else "folder")
    loaded = pretrained.load_pretrained(source, pretrained.read_config(source))
    hf = real_models["hf_untied" if kind == "gguf" else f"hf_{kind}"]
    idx = torch.randint(0, hf.config.vocab_size, (1, 50))
    with torch.no_grad():
        assert_close(loaded.lm(idx), hf(idx).logits, rtol=0, atol=1e-4)
    assert loaded.original_length == 64 and loaded.tokenizer.eos_token_id == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_loading_a_gguf_file_draws_no_bar_and_restores_the_bar_setting(real_models, capfd, enabled):
    """transformers' GGUF reader draws its own tqdm bar, which ``disable_progress_bar`` misses;
    posenc's load prints nothing, and leaves transformers' progress-bar setting as it found it."""
    from transformers.utils import logging

    from posenc.models import pretrained

    (logging.enable_progress_bar if enabled else logging.disable_progress_bar)()
    try:
        source = pretrained.resolve_source(str(real_models["gguf"]))
        capfd.readouterr()
        pretrained.load_pretrained(source, pretrained.read_config(source))
        out, err = capfd.readouterr()
        assert "GGUF" not in out + err and "it/s" not in err
        assert logging.is_progress_bar_enabled() == enabled
    finally:
        logging.enable_progress_bar()


def test_quiet_loading_hides_the_stream_not_the_warnings(capfd):
    import sys
    import warnings

    from posenc.models.pretrained import quiet_loading

    with pytest.warns(UserWarning, match="raised while loading"):
        with quiet_loading(gguf=True):
            print("Converting and de-quantizing GGUF tensors...", file=sys.stderr)
            warnings.warn("raised while loading", UserWarning, stacklevel=1)
    assert "GGUF" not in capfd.readouterr().err


def test_bfloat16_load_keeps_float32_frequencies(real_models):
    from posenc.models import pretrained

    source = pretrained.resolve_source(str(real_models["tied"]))
    loaded = pretrained.load_pretrained(source, pretrained.read_config(source), torch.bfloat16)
    assert loaded.lm.embed.weight.dtype == torch.bfloat16 and loaded.lm.pe.inv_freq.dtype == torch.float32


def test_bad_sources_are_one_line(real_models, tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    import shutil

    from posenc.models import pretrained

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="hub id, but the hub is offline"):
        pretrained.resolve_source("HuggingFaceTB/SmolLM2-135M")
    with pytest.raises(UserError, match="does not exist"):
        pretrained.resolve_source(str(tmp_path / "nothing.gguf"))
    bare = tmp_path / "bare"
    shutil.copytree(real_models["tied"], bare)
    for f in bare.glob("tokenizer*"):
        f.unlink()
    with pytest.raises(UserError, match="has no tokenizer"):
        pretrained.resolve_source(str(bare))
    from transformers import GPT2Config

    gpt2 = tmp_path / "gpt2"
    shutil.copytree(real_models["tied"], gpt2)
    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(gpt2)
    with pytest.raises(UserError, match=r"'gpt2' model; supported: llama \(Llama"):
        pretrained.read_config(pretrained.resolve_source(str(gpt2)))


def test_missing_extra_names_it(monkeypatch, tmp_path):
    import importlib.util

    from posenc.models import pretrained

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    with pytest.raises(UserError, match=r"needs gguf: pip install 'posenc\[hf\]'"):
        pretrained.resolve_source(str(tmp_path / "m.gguf"))


def test_memory_estimate_scales_with_length(real_models):
    from posenc.models import pretrained

    config = pretrained.read_config(pretrained.resolve_source(str(real_models["tied"])))
    short, long = pretrained.peak_bytes(config, 1000), pretrained.peak_bytes(config, 2000)
    assert long > short and pretrained.peak_bytes(config, 1000, torch.bfloat16) < short
    assert pretrained.peak_bytes(config, 10**12) > pretrained.available_bytes("cpu")


def test_memory_estimate_bounds_the_measured_peak_at_16k():
    """SmolLM2-135M at 16,384 tokens peaked at 1.80 GiB RSS (``/usr/bin/time -v posenc extrapolate
    --model SmolLM2-135M-Instruct.Q4_1.gguf --lengths 16384``): the estimate stays above it and
    under the 3 GiB goal. Fails on the old estimate, which counted (n_h, s, s) attention scores
    that causal SDPA never holds (12 GiB at 16k)."""
    from transformers import LlamaConfig

    from posenc.benchmarks.suite import SMOLLM2_SHAPES
    from posenc.models import pretrained

    estimate = pretrained.peak_bytes(LlamaConfig(**SMOLLM2_SHAPES), 16384) / 2**30
    assert 1.80 < estimate <= 3.0


def test_finetune_estimate_bounds_the_measured_peak_and_stops_a_run_first(real_models, monkeypatch):
    """SmolLM2-135M fine-tuned 2 steps at 512 tokens (posenc extrapolate --finetune-steps 2
    --lengths 256,512 --scale yarn) peaked at 4.63 GiB RSS; a fine-tune the host cannot hold is
    refused before any weight is read."""
    from transformers import LlamaConfig

    from posenc.benchmarks.suite import SMOLLM2_SHAPES
    from posenc.experiments.real import Checkpoint, RealSettings, prepare
    from posenc.models import pretrained

    config = LlamaConfig(**SMOLLM2_SHAPES)
    assert 4.63 < pretrained.finetune_peak_bytes(config, 512) / 2**30 < 8
    assert pretrained.finetune_peak_bytes(config, 512) > pretrained.peak_bytes(config, 512)
    tiny = pretrained.read_config(pretrained.resolve_source(str(real_models["tied"])))
    assert pretrained.finetune_peak_bytes(tiny, 2000) > pretrained.peak_bytes(tiny, 2000)
    monkeypatch.setattr(pretrained, "available_bytes", lambda device: pretrained.peak_bytes(tiny, 2000) + 1)
    checkpoint, cpu = Checkpoint(path=str(real_models["tied"])), torch.device("cpu")
    prepare(checkpoint, RealSettings(scales=["pi"], lengths=[2000]), cpu)
    with pytest.raises(UserError, match=r"real.lengths 2000 needs about .* GiB to fine-tune on cpu"):
        prepare(checkpoint, RealSettings(scales=["pi"], lengths=[2000], finetune_steps=1), cpu)


def test_a_gguf_file_without_accelerate_is_one_line_naming_the_extra(monkeypatch):
    """transformers refuses a GGUF file without accelerate; posenc says so before loading."""
    import importlib.util

    from posenc.models.pretrained import require_hf

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a))
    require_hf(gguf=False)  # a Hugging Face folder does not need it
    with pytest.raises(UserError, match=r"^--model with a real model needs accelerate: .*\[hf\]"):
        require_hf(gguf=True)
