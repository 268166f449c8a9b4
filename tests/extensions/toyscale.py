"""A researcher's own RoPE scaling: every frequency divided by √s (half-way to PI in log scale)."""

from dataclasses import dataclass

from posenc.pe.rope import rope_inv_freq
from posenc.pe.scaling import RopeScale


@dataclass
class SqrtPI(RopeScale):
    def frequencies(self, rot_dim: int, base: float, length: int):
        return rope_inv_freq(rot_dim, base) / self.factor_for(length) ** 0.5, 1.0
