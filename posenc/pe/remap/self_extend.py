"""Self-Extend (Jin et al. 2024, "LLM Maybe LongLM: Self-Extend LLM Context Window Without
Tuning", arXiv:2401.01325; reference code datamllab/LongLM, ``self_extend_patch``).

Keys within the neighbour window (i − j < W) are scored at their exact positions; farther keys
through grouped positions, ⌊p/G⌋ for queries and keys, the query's shifted by W − ⌊W/G⌋ so that
the grouped distance meets the exact one at the window's edge. One softmax runs over the merged
scores, as the reference code merges them with ``torch.where`` before its softmax.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posenc.pe.remap.base import Piece, Remap, band_pieces, check_at_least, check_within_context


@dataclass
class SelfExtend(Remap):
    """``group`` G ≥ 1 and neighbour ``window`` W ≥ 1 (None: a quarter of ``original_length``), W at
    most the trained context."""

    group: int = 8
    window: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.window is None:
            self.window = max(1, self.original_length // 4)
        check_at_least("group", self.group, 1)
        check_at_least("window", self.window, 1)
        check_within_context("window", self.window, self.original_length)

    def reach(self) -> tuple[str, int]:
        return "remap.window", self.window

    def views(self, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        g, w = self.group, self.window
        grouped = positions // g  # (s,)
        return [(positions, positions), (grouped + (w - w // g), grouped)]

    def max_distance(self, length: int) -> float:
        g, w = self.group, self.window
        return max(min(length, w) - 1, (length - 1) // g + w - w // g if length > w else 0)

    def pieces(self, start: int, stop: int) -> list[Piece]:
        return band_pieces(start, stop, self.window)
