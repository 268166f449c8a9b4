"""NoPE: no positional information at all.

Bidirectional attention is then permutation-equivariant; a causal mask alone still leaks order
(Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization").
"""

from __future__ import annotations

from posenc.pe.base import PositionScheme


class NoPE(PositionScheme):
    """No position signal; ``ndim`` only declares which models it is used with."""

    counterpart = "nope"  # the same option serves both kinds of model (pe.ndim tells which)

    def __init__(self, ndim: int = 1) -> None:
        super().__init__()
        self.ndim = ndim
