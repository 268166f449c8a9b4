"""Models: the tiny causal LM and the tiny ViT, each with an injected position scheme."""

from posenc.models.hf import from_hf_llama
from posenc.models.lm import CausalLM
from posenc.models.vit import ViT

__all__ = ["CausalLM", "ViT", "from_hf_llama"]
