"""ReRoPE and Leaky ReRoPE (Su 2023, "Rectified Rotary Position Embeddings"; reference code
bojone/rerope).

Keys within the window (i − j < w) are scored at their exact distance; farther keys at distance w
(ReRoPE: the query rotated to w, the key to 0), or, leaky, at w + (i − j − w)/k: the query rotated
to i/k + w(1 − 1/k) and the key to j/k (slope 1/k beyond the window, k > 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posenc.core.errors import ConfigError
from posenc.pe.remap.base import Piece, Remap, band_pieces, check_at_least, check_within_context


@dataclass
class ReRoPE(Remap):
    """Relative positions clipped at ``window`` w ≥ 1 (None: a quarter of ``original_length``), w at
    most the trained context."""

    window: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.window is None:
            self.window = max(1, self.original_length // 4)
        check_at_least("window", self.window, 1)
        check_within_context("window", self.window, self.original_length)

    def reach(self) -> tuple[str, int]:
        return "remap.window", self.window

    def views(self, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(positions, positions), (torch.full_like(positions, self.window), torch.zeros_like(positions))]

    def max_distance(self, length: int) -> float:
        return length - 1 if length <= self.window else self.window

    def pieces(self, start: int, stop: int) -> list[Piece]:
        return band_pieces(start, stop, self.window)


@dataclass
class LeakyReRoPE(ReRoPE):
    """Relative positions w + (d − w)/``k`` beyond ``window`` w, k > 1."""

    k: float = 16.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.k > 1:
            raise ConfigError(f"remap.k must be > 1 (the slope beyond the window is 1/k), got {self.k}")

    def views(self, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        slow = positions.double() / self.k  # (s,) float positions
        return [(positions, positions), (slow + self.window * (1 - 1 / self.k), slow)]

    def max_distance(self, length: int) -> float:
        return length - 1 if length <= self.window else self.window + (length - 1 - self.window) / self.k
