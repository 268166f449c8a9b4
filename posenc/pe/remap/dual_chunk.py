"""Dual Chunk Attention (An et al. 2024, "Training-Free Long-Context Scaling of Large Language
Models", arXiv:2402.17463; reference code HKUNLP/ChunkLlama, ``chunkllama_attn_replace``; the DCA
of Qwen2.5-1M).

The sequence is cut into chunks of L = ``chunk_size`` − ``local_window`` tokens and every key is
rotated to its index within its chunk, j mod L. A query i is rotated, against keys of
* its own chunk (intra-chunk): to i mod L, so distances are exact;
* the chunk before (successive-chunk): to min(i mod L + L, ``chunk_size``), so the nearest
  ``local_window`` keys keep their exact distance and none is farther than ``chunk_size``;
* any earlier chunk (inter-chunk): to min(2L − 1, ``chunk_size``), the successive-chunk position
  of a chunk's last query.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posenc.core.errors import ConfigError
from posenc.pe.remap.base import Piece, Remap, check_at_least, check_within_context


@dataclass
class DualChunk(Remap):
    """``chunk_size`` (None: 3/4 of ``original_length``, as ChunkLlama) at most the trained context,
    ``local_window`` (None: 1/16 of it) from 0 to ``chunk_size`` − 1."""

    chunk_size: int | None = None
    local_window: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.chunk_size is None:
            self.chunk_size = max(2, self.original_length * 3 // 4)
        if self.local_window is None:
            self.local_window = self.original_length // 16
        check_at_least("chunk_size", self.chunk_size, 2)
        check_within_context("chunk_size", self.chunk_size, self.original_length)
        check_at_least("local_window", self.local_window, 0)
        if self.local_window >= self.chunk_size:
            raise ConfigError(
                f"remap.local_window={self.local_window} must be below remap.chunk_size={self.chunk_size}"
            )

    @property
    def chunk_len(self) -> int:
        """L: the tokens of one chunk."""
        return self.chunk_size - self.local_window

    def reach(self) -> tuple[str, int]:
        return "remap.chunk_size - remap.local_window", self.chunk_len

    def views(self, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        n, c = self.chunk_len, self.chunk_size
        within = positions % n  # (s,) keys, and queries of their own chunk
        successive = (within + n).clamp(max=c)
        inter = torch.full_like(positions, min(2 * n - 1, c))
        return [(within, within), (successive, within), (inter, within)]

    def max_distance(self, length: int) -> float:
        n = self.chunk_len
        return length - 1 if length <= n else min(min(length, 2 * n) - 1, self.chunk_size)

    def pieces(self, start: int, stop: int) -> list[Piece]:
        n = self.chunk_len
        first, last = start // n, (stop - 1) // n  # chunks of the block's first and last query
        if first == last:  # one chunk's queries: each key's part is its chunk's, no mask but the causal one
            return [
                Piece(0, first * n, stop),
                Piece(1, max(0, (first - 1) * n), first * n),
                Piece(2, 0, max(0, (first - 1) * n)),
            ]
        return [
            Piece(0, first * n, stop, lambda i, j: i // n == j // n),
            Piece(1, max(0, (first - 1) * n), last * n, lambda i, j: i // n - j // n == 1),
            Piece(2, 0, max(0, (first - 1) * n)),
            Piece(2, max(0, (first - 1) * n), max(0, (last - 1) * n), lambda i, j: i // n - j // n >= 2),
        ]
