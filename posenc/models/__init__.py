"""Models: the tiny causal LM (and, later, the tiny ViT) with an injected position scheme."""

from posenc.models.hf import from_hf_llama
from posenc.models.lm import CausalLM

__all__ = ["CausalLM", "from_hf_llama"]
