"""Loading real models as users expect: weights read straight into the dtype asked for (no float32
copy), the memory estimate counting that dtype, and a hub id already in the local Hugging Face
cache loaded from there with no network and no HF_HUB_OFFLINE."""

import shutil
import socket

import pytest
import torch
from torch.testing import assert_close

pytest.importorskip("transformers")

from posenc.core.errors import UserError  # noqa: E402
from posenc.models import pretrained  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["tied", "gguf"])
def test_weights_are_read_in_the_asked_dtype(real_models, monkeypatch, kind, dtype):
    """Fails on the old load, which read float32 weights (``dtype=torch.float32``) and cast them
    afterwards, holding both copies at its peak; the logits are those of that detour, exactly."""
    from transformers import AutoModelForCausalLM

    asked = []
    real = AutoModelForCausalLM.from_pretrained.__func__

    def spy(cls, *args, **kwargs):
        asked.append(kwargs.get("dtype"))
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(spy))
    source = pretrained.resolve_source(str(real_models[kind]))
    loaded = pretrained.load_pretrained(source, pretrained.read_config(source), dtype)
    assert asked == [dtype]
    assert {p.dtype for p in loaded.lm.parameters()} == {dtype} and loaded.lm.pe.inv_freq.dtype == torch.float32
    monkeypatch.undo()
    detour = pretrained.load_pretrained(source, pretrained.read_config(source)).lm.to(dtype)  # float32, then cast
    idx = torch.randint(0, 384, (1, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # the same rounded weights: the same numbers, without the float32 copy
        assert torch.equal(loaded.lm(idx), detour(idx))


@pytest.mark.parametrize("kind", ["tied", "untied"])
def test_memory_estimate_counts_the_loaded_weights_in_their_dtype(real_models, kind):
    """The estimate's weights are the loaded model's parameters (norm weights aside: < 1%), at the
    dtype's size: half of float32's for bf16 and fp16."""
    source = pretrained.resolve_source(str(real_models[kind]))
    config = pretrained.read_config(source)
    for dtype, size in ((torch.float32, 4), (torch.bfloat16, 2), (torch.float16, 2)):
        lm = pretrained.load_pretrained(source, config, dtype).lm
        loaded = sum(p.numel() * p.element_size() for p in lm.parameters())
        estimated = pretrained._n_params(config) * size
        assert 0.99 * loaded < estimated <= loaded
    fp32, bf16 = (pretrained.peak_bytes(config, 4096, d) for d in (torch.float32, torch.bfloat16))
    # activations halve; half-precision weights count twice (a CPU matmul's converted copy), as float32's once
    assert fp32 - bf16 == 4096 * (6 * 64 + 4 * 4 * 16 + 3 * 128) * 2


def hub_cache(root, repo_id, folder, revision="0123456789abcdef0123456789abcdef01234567"):
    """``folder``'s files laid out as huggingface_hub caches a download of ``repo_id``:
    models--org--name/snapshots/<revision>/… and refs/main naming the revision."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    shutil.copytree(folder, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return repo


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """An empty Hugging Face cache in tmp_path, HF_HUB_OFFLINE unset, and every connection refused."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    attempts = []

    def refuse(self, address):
        attempts.append(address)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: refuse(None, address))
    return cache, attempts


def test_a_cached_hub_id_loads_offline_without_hf_hub_offline(real_models, no_network, monkeypatch):
    cache, attempts = no_network
    repo = hub_cache(cache, "tiny-org/tiny-llama", real_models["tied"])
    source = pretrained.resolve_source("tiny-org/tiny-llama")
    assert (source.kind, source.name, source.hub_id) == ("folder", "tiny-llama", "tiny-org/tiny-llama")
    assert source.path == str(repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567")
    loaded = pretrained.load_pretrained(source, pretrained.read_config(source))
    hf = real_models["hf_tied"]
    idx = torch.randint(0, hf.config.vocab_size, (1, 30), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert_close(loaded.lm(idx), hf(idx).logits, rtol=0, atol=1e-4)
    assert attempts == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline said outright: the cached copy still loads
    assert pretrained.resolve_source("tiny-org/tiny-llama") == source


def test_a_hub_id_not_cached_still_asks_the_hub(real_models, no_network):
    """Not in the cache (or only partly: no tokenizer), the id goes to the hub, whose failure is one line."""
    cache, attempts = no_network
    repo = hub_cache(cache, "tiny-org/no-tokenizer", real_models["tied"])
    for f in (repo / "snapshots").glob("*/tokenizer*"):
        f.unlink()
    for repo_id in ("tiny-org/absent", "tiny-org/no-tokenizer"):
        with pytest.raises(UserError, match=f"--model '{repo_id}': cannot reach it on the hub .*, nor is a complete"):
            pretrained.resolve_source(repo_id)
    assert attempts  # it did try


def test_cli_extrapolates_a_cached_hub_id_offline(cli, real_models, no_network, tmp_path):
    cache, attempts = no_network
    hub_cache(cache, "tiny-org/tiny-llama", real_models["untied"])
    code, out, err = cli(
        "extrapolate",
        "--model",
        "tiny-org/tiny-llama",
        "--lengths",
        "16,32",
        "--device",
        "cpu",
        "--results-dir",
        tmp_path,
    )
    assert code == 0, err
    assert "extrapolation: tiny-llama" in out and attempts == []


def test_half_precision_estimate_bounds_the_measured_peak():
    """SmolLM2-135M from its GGUF file at 8,192 tokens (``/usr/bin/time -v posenc extrapolate
    --lengths 8192 --device cpu``) peaked at 1.69 GiB RSS in bf16 and 1.73 GiB in float32: the
    estimates stay above both. Fails on the old one, which gave 1.47 GiB in bf16 (the weights once,
    0.5 GiB for a runtime whose imports alone hold 739 MiB)."""
    from transformers import LlamaConfig

    from posenc.benchmarks.suite import SMOLLM2_SHAPES

    config = LlamaConfig(**SMOLLM2_SHAPES)
    for dtype, measured in ((torch.bfloat16, 1.69), (torch.float32, 1.73)):
        assert measured < pretrained.peak_bytes(config, 8192, dtype) / 2**30 < 1.3 * measured


def test_a_quantized_gguf_loads_dense_in_the_asked_dtype_without_a_packed_weights_warning(tmp_path):
    """A Q8_0 file, quantized as published GGUF files are, loads as dense weights in the dtype asked
    for, equal to its blocks unpacked. transformers releases that can keep GGUF weights packed warn,
    on a bfloat16 load, that packed weights compute in float32 and to pass float32 instead; posenc
    asks for the unpacked model up front (``Source.model_kwargs``), so no such warning is shown."""
    import logging

    import gguf
    from hf_models import tiny_llama, tiny_tokenizer, write_gguf

    model = tiny_llama(tied=False)
    path = write_gguf(tmp_path / "q8.gguf", model, tiny_tokenizer(), q8=True)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        source = pretrained.resolve_source(str(path))
        loaded = pretrained.load_pretrained(source, pretrained.read_config(source), torch.bfloat16)
    finally:
        logger.removeHandler(handler)
    assert not [r.getMessage() for r in records if "packed" in r.getMessage()]
    assert {p.dtype for p in loaded.lm.parameters()} == {torch.bfloat16}
    kind = gguf.GGMLQuantizationType.Q8_0
    up = model.model.layers[1].mlp.up_proj.weight.detach().float().numpy()
    unpacked = torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(up, kind), kind).copy())
    assert not torch.equal(unpacked, torch.from_numpy(up))  # Q8_0 rounded them
    assert torch.equal(loaded.lm.blocks[1].mlp.up.weight, unpacked.to(torch.bfloat16))
