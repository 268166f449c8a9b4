"""Attention sinks (StreamingLLM: Xiao et al. 2024, "Efficient Streaming Language Models with
Attention Sinks", arXiv:2309.17453; reference code mit-han-lab/streaming-llm).

Every query sees the first ``n_sink`` tokens and the last ``window`` tokens (itself included),
with positions assigned within the cache, as the paper does: the sinks at slots 0..n − 1, the
window right after them, so that query i sits at slot min(i, n + window − 1). A window key is
then at its exact distance i − j and a sink key j at min(i, n + window − 1) − j. Computed for all
queries at once, this is what decoding token by token with that cache gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posenc.core.errors import ConfigError
from posenc.pe.remap.base import Piece, Remap, band_pieces, check_at_least


@dataclass
class AttentionSinks(Remap):
    """``n_sink`` ≥ 0 first tokens and a ``window`` ≥ 1 of recent ones (None: the trained context
    less the sinks); the cache (n_sink + window tokens) at most the trained context."""

    n_sink: int = 4
    window: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least("n_sink", self.n_sink, 0)
        if self.window is None:
            self.window = max(1, self.original_length - self.n_sink)
        check_at_least("window", self.window, 1)
        if self.n_sink + self.window > self.original_length:
            raise ConfigError(
                f"remap.n_sink + remap.window = {self.n_sink} + {self.window} is larger than the trained context "
                f"{self.original_length} (remap.original_length): cache positions the model never saw"
            )

    def reach(self) -> tuple[str, int]:
        return "remap.window", self.window

    def views(self, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        slot = positions.clamp(max=self.n_sink + self.window - 1)  # (s,) the query's slot in the cache
        return [(positions, positions), (slot, positions)]

    def max_distance(self, length: int) -> float:
        return min(length, self.n_sink + self.window) - 1  # the query's slot against slot 0

    def pieces(self, start: int, stop: int) -> list[Piece]:
        return band_pieces(start, stop, self.window, far_keys=self.n_sink)
