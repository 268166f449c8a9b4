"""Tiny real-model checkpoints for tests, built offline: a random Llama with grouped-query
attention and a BPE tokenizer trained on the built-in corpus, saved as a Hugging Face folder and
written as a GGUF file with the ``gguf`` package's writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

VOCAB = 384


def tiny_tokenizer():
    """A byte-level BPE of ``VOCAB`` tokens trained on the first 200 pydoc topics, EOS ``</s>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from posenc.tasks.text import builtin_documents

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(builtin_documents()[:200], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", bos_token="</s>")


def tiny_llama(tied: bool = True, max_positions: int = 64, seed: int = 0, **overrides):
    """A random LlamaForCausalLM: 2 layers, 4 heads over 2 key/value heads, θ = 10000."""
    from transformers import LlamaConfig, LlamaForCausalLM

    kwargs = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=tied,
        rope_theta=10000.0,
        eos_token_id=0,
        bos_token_id=0,
    )
    kwargs.update(overrides)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**kwargs)).eval()
    with torch.no_grad():  # larger weights than the 0.02 init, so positions change the logits
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.15)
    return model


def save_folder(path: Path, tied: bool = True, tokenizer=None, **overrides) -> Path:
    """``tiny_llama`` and ``tiny_tokenizer`` saved as a Hugging Face checkpoint folder."""
    tiny_llama(tied, **overrides).save_pretrained(path)
    (tokenizer or tiny_tokenizer()).save_pretrained(path)
    return Path(path)


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row order (interleaved rotary pairs), which transformers undoes on load."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path: Path, model, tokenizer, q8: bool = False) -> Path:
    """``model`` (a LlamaForCausalLM) and its BPE tokenizer as a float32 GGUF file; ``q8``: the
    layers' matrices quantized to Q8_0 (blocks of 32 int8 with one scale), as published files are."""
    import gguf

    c = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_vocab_size(c.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8 else gguf.LlamaFileType.ALL_F32)
    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    import json

    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t == "</s>" else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_bos_token_id(tokenizer.bos_token_id)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", sd["model.norm.weight"])
    if not c.tie_word_embeddings:
        writer.add_tensor("output.weight", sd["lm_head.weight"])
    names = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for i in range(c.num_hidden_layers):
        for theirs, ours in names.items():
            w = sd[f"model.layers.{i}.{theirs}.weight"]
            if ours == "attn_q":
                w = _permute(w, c.num_attention_heads)
            elif ours == "attn_k":
                w = _permute(w, c.num_key_value_heads)
            w = np.ascontiguousarray(w)
            if q8 and w.ndim == 2:
                kind = gguf.GGMLQuantizationType.Q8_0
                writer.add_tensor(f"blk.{i}.{ours}.weight", gguf.quants.quantize(w, kind), raw_dtype=kind)
            else:
                writer.add_tensor(f"blk.{i}.{ours}.weight", w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)
