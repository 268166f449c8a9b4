"""Position and attention remaps (``configs/remap/``): training-free ways a rotary model attends
past its trained context by changing *which positions* a query and a key are rotated to, and which
keys a query sees, while a frequency scaling (``configs/scale/``) changes the frequencies. The two
compose: a remap rotates with the scheme's frequencies as they are installed.

Every remap here is a small set of **views**, each a pair of position vectors (where queries
are rotated, where keys are rotated), and a rule that sends each (query i, key j ≤ i) pair to one
view or to none (not attended): Self-Extend's neighbour and grouped views, ReRoPE's exact and
clipped ones, the sliding window and the sinks of StreamingLLM, Dual Chunk Attention's intra-,
successive- and inter-chunk ones. The score of a pair is q_i rotated at its view's query position
against k_j rotated at its view's key position; one softmax runs over every key a query sees.

``remapped_attention`` computes that over ``chunk`` queries at a time, each block as a few
**pieces** (a view over a contiguous range of keys, masked where the rule says so), each piece in
tiles of keys with flash attention's online softmax: scores of (b, n_h, chunk, tile) at a time,
never (s, s); every view's rotated copy of Q and K is computed once per layer. A piece whose keys
all come before the block's first query needs no mask.

Facts on each class: ``acts_on`` (what it can remap) and ``applies(pe)``: RoPE
(``posenc.pe.rope.RoPE``, whatever frequencies a scale installed), never a bias scheme, a table,
NoPE, or xPos (whose scales are centred on each position vector, so its q·k is not a function of
the two positions alone once queries and keys are rotated to different vectors).

Notation: b batch, s sequence length, n_h query heads, n_kv key/value heads, h_d head dimension,
c queries of a block, e keys of a piece.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme
from posenc.pe.rope import RoPE, apply_rope

# Score entries of one block of queries against the keys they see (32 MiB in float32): the chunk
# of queries is chosen so that a block holds at most this many
REMAP_BLOCK_ELEMENTS = 1 << 23
CHUNK = 128  # queries per block at most
# Scores of one tile of keys (2 MiB in float32, a CPU's L2 or L3), at least MIN_TILE keys a tile
REMAP_TILE_ELEMENTS = 1 << 19
MIN_TILE = 64

# (c, 1) query indices, (1, e) key indices -> (c, e) bool: the pairs a piece scores
Rule = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Piece:
    """Keys ``start``..``stop`` − 1 of a block of queries, scored through view ``view``; ``rule``
    (None: every pair) says which pairs; keys after a query are never scored (causal)."""

    view: int
    start: int
    stop: int
    rule: Rule | None = None


def band_pieces(start: int, stop: int, window: int, far_keys: int | None = None) -> list[Piece]:
    """Queries ``start``..``stop`` − 1 with the keys of distance i − j < ``window`` in view 0 and
    the farther ones in view 1 (keys j < ``far_keys`` only, when given: attention sinks).

    The near keys run from ``start`` − ``window`` + 1, the first ``stop`` − ``start`` of them too
    far for some query of the block (masked), the rest near for all (only the causal mask); the far
    keys j ≤ i − window run to ``stop`` − ``window``, those before ``start`` − ``window`` + 1 far for
    every query of the block (no mask at all).
    """
    near_from = max(0, start - window + 1)
    edge = min(stop, max(near_from, stop - window))  # near keys before it are far for some query
    far_to = max(0, stop - window)
    if far_keys is not None:
        far_to = min(far_to, far_keys)
    free = min(near_from, far_to)
    pieces = [Piece(0, near_from, edge, lambda i, j: i - j < window), Piece(0, edge, stop)]
    if free > 0:
        pieces.append(Piece(1, 0, free))
    if far_to > free:
        pieces.append(Piece(1, free, far_to, lambda i, j: i - j >= window))
    return pieces


def remapped_attention(
    v: torch.Tensor,
    views: Sequence[tuple[torch.Tensor, torch.Tensor]],
    pieces: Callable[[int, int], Sequence[Piece]],
    chunk: int,
    tile: int | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """Causal attention over remapped positions, ``chunk`` queries at a time, ``tile`` keys of a
    piece at a time (default: ``REMAP_TILE_ELEMENTS`` scores a tile, at least ``MIN_TILE`` keys);
    ``scale`` on the scores (default 1/√h_d; Gemma's is its own).

    v is (b, n_kv, s, h_d); ``views`` holds each view's rotated (b, n_h, m, h_d) queries, those of
    the last m ≤ s tokens (a decoding step's), and (b, n_kv, s, h_d) keys; ``pieces(start, stop)``
    the pieces of the queries start..stop − 1.
    Scores are q·k/√h_d in the inputs' dtype; one softmax, in float32, over every piece's keys (a
    key in two pieces is −∞ in all but one of them), computed online as flash attention does: each
    tile less the running row maximum, exponentiated in place, its row sums and its product with
    the tile's values added up, both rescaled when the maximum grows, divided once at the end. A
    tile stays in the CPU's cache, where a (chunk, s) block would be read from memory by each of
    those steps. Grouped-query heads share K and V without copies. Returns (b, n_h, m, h_d).
    """
    b, n_h, m, h_d = views[0][0].shape
    n_kv, s = v.shape[1], v.shape[2]
    first = s - m  # the position of the first query
    rep = n_h // n_kv
    scale = h_d**-0.5 if scale is None else scale
    scaled = {id(qv): qv * scale for qv, _ in views}  # each view's queries once
    out = []
    for start in range(first, s, chunk):
        stop = min(start + chunk, s)
        c = stop - start
        width = tile or max(MIN_TILE, REMAP_TILE_ELEMENTS // (b * n_h * c))
        i = torch.arange(start, stop, device=v.device)[:, None]  # (c, 1)
        shift = torch.zeros(b, n_kv, rep * c, 1, device=v.device)  # the running row maximum (0 while none)
        acc = torch.zeros(b, n_kv, rep * c, h_d, device=v.device)  # Σ exp(score − shift)·v
        total = torch.zeros(b, n_kv, rep * c, 1, device=v.device)  # Σ exp(score − shift)
        for p in pieces(start, stop):
            qv, kv = views[p.view]
            qb = scaled[id(qv)][:, :, start - first : stop - first]  # (b, n_h, c, h_d)
            qb = qb.reshape(b, n_kv, rep * c, h_d)  # (b, n_kv, rep·c, h_d)
            for a in range(p.start, p.stop, width):
                z = min(a + width, p.stop)
                scores = (qb @ kv[:, :, a:z].transpose(-1, -2)).float()  # (b, n_kv, rep·c, e)
                j = torch.arange(a, z, device=v.device)[None, :]  # (1, e)
                keep = None if p.rule is None else p.rule(i, j)
                if z > start + 1:  # keys after some query of the block
                    keep = (j <= i) if keep is None else keep & (j <= i)
                if keep is not None:
                    if not bool(keep.any()):
                        continue
                    scores = scores.view(b, n_kv, rep, c, -1).masked_fill_(~keep, float("-inf")).view_as(scores)
                # a constant that cancels in the softmax: no gradient flows through it
                top = scores.detach().amax(-1, keepdim=True)
                new = torch.maximum(shift, top.masked_fill_(top == float("-inf"), 0))
                grown = (shift - new).exp_()  # (b, n_kv, rep·c, 1): 1 where the maximum stayed
                acc, total, shift = acc * grown, total * grown, new
                scores = scores.sub_(shift).exp_()  # (b, n_kv, rep·c, e) unnormalised probabilities
                acc = acc + (scores.to(v.dtype) @ v[:, :, a:z]).float()  # (b, n_kv, rep·c, h_d)
                total = total + scores.sum(-1, keepdim=True)
        out.append((acc / total).to(v.dtype).view(b, n_h, c, h_d))
    return torch.cat(out, dim=2)  # (b, n_h, m, h_d)


def remap_chunk(batch_heads: int, seq_len: int) -> int:
    """Queries per block: ``CHUNK`` or fewer, at most ``REMAP_BLOCK_ELEMENTS`` scores of b·n_h
    heads against s keys."""
    return max(1, min(seq_len, CHUNK, REMAP_BLOCK_ELEMENTS // max(1, batch_heads * seq_len)))


@dataclass
class RemapState:
    """A remap's per-forward state, computed once and shared by every layer (as a scheme's
    ``rotation``): the scheme, its rotations at each distinct position vector, the (query, key)
    rotation of each view, the pieces and the chunk."""

    pe: RoPE
    rotations: list[Any]
    views: list[tuple[int, int]]
    pieces: Callable[[int, int], Sequence[Piece]]
    chunk: int
    tile: int | None = None

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> torch.Tensor:
        """(b, n_h, m, h_d) q of the last m ≤ s tokens (m < s: a decoding step), (b, n_kv, s, h_d)
        k and v, unrotated -> (b, n_h, m, h_d); ``scale`` on the scores (default 1/√h_d)."""
        layout, m = self.pe.layout, q.shape[2]
        last = [(cos[-m:], sin[-m:]) for cos, sin in self.rotations]  # (m, r/2) each: the queries' rows
        qs = {n: apply_rope(q, *last[n], layout) for n in dict.fromkeys(qi for qi, _ in self.views)}
        ks = {n: apply_rope(k, *self.rotations[n], layout) for n in dict.fromkeys(ki for _, ki in self.views)}
        views = [(qs[qi], ks[ki]) for qi, ki in self.views]  # (b, n_h, s, h_d) and (b, n_kv, s, h_d) each
        return remapped_attention(v, views, self.pieces, self.chunk, self.tile, scale)


class NoRemap:
    """Attention as trained: every key seen at its own position (the default, ``remap=none``)."""

    acts_on: ClassVar[str] = "every scheme"

    @classmethod
    def applies(cls, pe: PositionScheme) -> bool:
        return True

    @property
    def active(self) -> bool:
        """False: the model runs its own attention, untouched."""
        return False

    def check(self, pe: PositionScheme, scheme: str, option: str | None = None) -> None:
        """Refuse a scheme the remap cannot act on, naming it (``scheme``: its config option;
        ``option``: the remap's, default its class name)."""
        if not self.applies(pe):
            raise ConfigError(
                f"remap '{option or self.name}' remaps {self.acts_on}; pe '{scheme}' ({type(pe).__name__}) is not one: "
                "use pe=rope, or remap=none"
            )

    def check_lengths(self, longest: int) -> None:
        """Refuse settings that do nothing at the longest evaluated length."""

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass
class Remap(NoRemap):
    """Shared by the remaps: the trained context (``original_length``) their defaults derive from,
    the views and the pieces."""

    acts_on: ClassVar[str] = "the positions of RoPE (pe=rope)"
    original_length: int = 128

    def __post_init__(self) -> None:
        if self.original_length < 1:
            raise ConfigError(f"remap.original_length must be >= 1, got {self.original_length}")

    @classmethod
    def applies(cls, pe: PositionScheme) -> bool:
        return isinstance(pe, RoPE)

    @property
    def active(self) -> bool:
        return True

    def reach(self) -> tuple[str, int]:
        """The setting (how it reads, e.g. ``remap.window``, and its value) below which distances are
        exact: at or past the longest evaluated length the remap changes nothing."""
        raise NotImplementedError

    def check_lengths(self, longest: int) -> None:
        name, value = self.reach()
        if value >= longest:
            raise ConfigError(
                f"{name} = {value} is not below the longest evaluated length {longest}: "
                f"remap '{self.name}' would change nothing; give a smaller {name} or longer lengths"
            )

    def views(self, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(s,) positions 0..s − 1 -> each view's (s,) query and key positions; a view may share
        a tensor with another (it is rotated once)."""
        raise NotImplementedError

    def max_distance(self, length: int) -> float:
        """The largest relative position (query's minus key's) any attended pair gets over ``length``
        tokens: what to keep below the trained context when choosing the settings (Self-Extend's
        (L − 1)//G + W − W//G; its paper picks G and W so that this stays within the context)."""
        raise NotImplementedError

    def pieces(self, start: int, stop: int) -> list[Piece]:
        """The pieces of the queries ``start``..``stop`` − 1."""
        raise NotImplementedError

    def prepare(
        self, pe: RoPE, positions: torch.Tensor, dtype: torch.dtype, chunk: int, tile: int | None = None
    ) -> RemapState:
        """The state every layer's attention uses: the scheme's rotation at each distinct position
        vector of the views, once (computed in float32 by the caller, as a scheme's rotation is);
        ``chunk`` queries and ``tile`` keys at a time (``remapped_attention``)."""
        s = positions.shape[-1]
        if positions.dim() != 1 or positions.is_floating_point() or not torch.equal(positions.cpu(), torch.arange(s)):
            raise ConfigError(f"remap '{self.name}' runs on the positions 0..s-1 of a whole window")
        tensors: list[torch.Tensor] = []
        views = []
        for qp, kp in self.views(positions):
            pair = []
            for t in (qp, kp):
                found = next((n for n, u in enumerate(tensors) if u is t), None)
                if found is None:
                    tensors.append(t)
                    found = len(tensors) - 1
                pair.append(found)
            views.append((pair[0], pair[1]))
        rotations = [pe.rotation(t, dtype) for t in tensors]
        return RemapState(pe, rotations, views, self.pieces, chunk, tile)


def check_at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise ConfigError(f"remap.{name} must be >= {low}, got {value}")


def check_within_context(name: str, value: int, context: int) -> None:
    if value > context:
        raise ConfigError(
            f"remap.{name}={value} is larger than the trained context {context} (remap.original_length): "
            "its positions would be ones the model never saw"
        )
