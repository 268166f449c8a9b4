"""``device=cuda`` runs the code the CPU runs, with bf16 weights: a Llama (posenc's own LM) and a
Gemma 3 (transformers' modules, posenc's RoPE injected) loaded straight into bf16 on the GPU score
as their float32 CPU selves do, within bf16's rounding; the memory estimate bounds the measured peak;
``posenc extrapolate --device cuda --dtype bf16`` runs end to end. Skipped without a CUDA GPU."""

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
pytest.importorskip("transformers")

from posenc.models import pretrained  # noqa: E402


def agree(ours: torch.Tensor, reference: torch.Tensor) -> None:
    """bf16 logits against float32 ones: mean error under 2% of the logits' scale, top-1 mostly equal."""
    ours, reference = ours.float().cpu(), reference.float().cpu()
    assert (ours - reference).abs().mean() < 0.02 * reference.abs().mean()
    assert (ours.argmax(-1) == reference.argmax(-1)).float().mean() > 0.9


def test_bf16_llama_on_cuda_scores_as_float32_on_cpu(real_models):
    source = pretrained.resolve_source(str(real_models["tied"]))
    config = pretrained.read_config(source)
    gpu = pretrained.load_pretrained(source, config, torch.bfloat16, "cuda").lm
    assert {(p.device.type, p.dtype) for p in gpu.parameters()} == {("cuda", torch.bfloat16)}
    assert gpu.pe.inv_freq.device.type == "cuda" and gpu.pe.inv_freq.dtype == torch.float32
    cpu = pretrained.load_pretrained(source, config).lm
    idx = torch.randint(0, config.vocab_size, (1, 256), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        agree(gpu(idx.cuda()), cpu(idx))
        losses = gpu(idx[:, :-1].cuda(), targets=idx[:, 1:].cuda(), chunk=64)
        assert losses.dtype == torch.float32
        torch.testing.assert_close(losses.mean().cpu(), cpu(idx[:, :-1], targets=idx[:, 1:]).mean(), rtol=0.02, atol=0)


def test_bf16_gemma3_on_cuda_scores_as_float32_on_cpu(tmp_path):
    from hf_models import tiny_tokenizer
    from test_families import tiny

    hf = tiny("gemma3_text", "yarn")
    hf.save_pretrained(tmp_path)
    tiny_tokenizer().save_pretrained(tmp_path)
    source = pretrained.resolve_source(str(tmp_path))
    config = pretrained.read_config(source)
    gpu = pretrained.load_pretrained(source, config, torch.bfloat16, "cuda").lm
    cpu = pretrained.load_pretrained(source, config).lm
    idx = torch.randint(0, config.vocab_size, (1, 96), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        agree(gpu(idx.cuda()), cpu(idx))


def test_memory_estimate_bounds_the_cuda_peak_in_bf16(real_models):
    """What one scored forward allocates beyond the loaded model, from one length to a 4x longer
    one (the CUDA runtime's own workspaces cancel out), stays within what the estimate adds."""
    source = pretrained.resolve_source(str(real_models["tied"]))
    config = pretrained.read_config(source)
    lm = pretrained.load_pretrained(source, config, torch.bfloat16, "cuda").lm
    peaks = {}
    for length in (8192, 32768):
        idx = torch.randint(0, config.vocab_size, (1, length), device="cuda")
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        with torch.no_grad():
            lm(idx[:, :-1], targets=idx[:, 1:], chunk=1024)
        torch.cuda.synchronize()
        peaks[length] = torch.cuda.max_memory_allocated() - start
        del idx
    estimated = pretrained.peak_bytes(config, 32768, torch.bfloat16) - pretrained.peak_bytes(
        config, 8192, torch.bfloat16
    )
    assert 0 < peaks[32768] - peaks[8192] <= estimated


def test_cli_extrapolates_on_cuda_in_bf16(cli, real_models, tmp_path):
    import pandas as pd
    import yaml

    runs = {}
    for device, dtype in (("cuda", "bf16"), ("cpu", "float32")):
        root = tmp_path / f"{device}-{dtype}"
        code, out, err = cli(
            "extrapolate", "--model", real_models["untied"], "--scale", "yarn", "--lengths", "32,128",
            "--device", device, "--dtype", dtype, "--results-dir", root,
        )  # fmt: skip
        assert code == 0, err
        [run] = list((root / "runs").iterdir())
        config = yaml.safe_load((run / "config.yaml").read_text())
        assert (config["model"]["device"], config["model"]["dtype"]) == (device, dtype)
        runs[dtype] = pd.read_csv(run / "table.csv").set_index(["scale", "metric"])
    ratio = runs["bf16"]["128"] / runs["float32"]["128"]
    assert ((ratio - 1).abs() < 0.02).all(), ratio
