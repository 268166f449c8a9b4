"""The one interface through which a position scheme reaches a model.

A scheme acts in one or more of three places, and says which with class flags:

* ``adds_embedding``: ``embedding(positions)`` is added to the token (or patch) embeddings;
* ``rotates_qk``: ``rotation(positions)`` is computed once per forward pass and every attention
  layer calls ``rotate_qk(q, k, rotation)`` (RoPE, xPos);
* ``adds_bias``: ``bias(q_positions, k_positions)`` is added to the attention scores (relative
  bias, T5 buckets, ALiBi).

Positions are explicit tensors: ``(s,)`` or ``(b, s)`` integer (or, after rescaling, float)
indices for text, ``(s, 2)`` / ``(b, s, 2)`` (row, col) for patches. Rescaling therefore acts on
positions or frequencies in the scheme, never on special cases in a model.

Randomized positions (Ruoss et al. 2023) are a training-time choice of *which* positions a model
sees, so they live here and in the model's ``forward``, not in any scheme: a scheme only carries
the two settings (``randomized``, ``randomized_max``) from its config to the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import nn

from posenc.core.errors import ConfigError, UserError


def float32(device: torch.device):
    """A context with autocast off on ``device``: under mixed precision (``train.precision``) the
    models compute embeddings, rotary angles, cos/sin and position biases inside it, in float32
    (a bf16 angle m·θ is off by up to 0.4% at m = 256; an MLP bias such as FIRE's would run in bf16),
    and cast only the result to the attention's dtype."""
    return torch.autocast(device.type, enabled=False)


class PositionOutOfRange(UserError):
    """A position past what a scheme can represent (a learned table past its length)."""


class PositionScheme(nn.Module):
    """Base class: a scheme that does nothing (NoPE) unless a subclass sets a flag.

    ``ndim`` is the number of coordinates per position (1 for text, 2 for patch grids);
    ``max_positions`` is the number of positions a scheme can represent, or None if unbounded.
    ``encodes`` is what the scheme tells attention about a position: ``"nothing"`` (NoPE),
    ``"absolute"`` (an embedding of the position itself) or ``"relative"`` (a function of the
    distance between query and key); ``counterpart`` is the config option of the same family for
    the other kind of model (text <-> patches), or None when the family has no such member.
    """

    adds_embedding: ClassVar[bool] = False
    rotates_qk: ClassVar[bool] = False
    adds_bias: ClassVar[bool] = False
    ndim: ClassVar[int] = 1
    encodes: ClassVar[str] = "nothing"
    counterpart: ClassVar[str | None] = None
    grid_methods: ClassVar[tuple[str, ...]] = ("none",)  # how it serves another patch grid (pe.grid)
    has_key_bias: ClassVar[bool] = False  # ``key_bias`` gives the per-key form of ``bias`` (ALiBi)
    max_positions: int | None = None
    nope_layers: tuple[int, ...] = ()  # layers a rotary scheme leaves unrotated (iRoPE; ``RoPE``)
    randomized: bool = False
    randomized_max: int | None = None

    def set_randomized(self, randomized: bool, randomized_max: int) -> None:
        """Train on sorted random positions from [0, ``randomized_max``) (see ``randomized_positions``)."""
        if randomized_max < 1:
            raise ConfigError(f"pe.randomized_max must be >= 1, got {randomized_max}")
        if randomized and self.max_positions is not None and randomized_max > self.max_positions:
            raise ConfigError(
                f"pe.randomized_max={randomized_max} is past the {type(self).__name__} table of "
                f"{self.max_positions} positions; raise pe.max_len to at least {randomized_max}"
            )
        self.randomized, self.randomized_max = randomized, randomized_max

    def no_weight_decay(self) -> set[str]:
        """Every parameter of a scheme is a position parameter, which the optimizer leaves
        undecayed (timm's ``no_weight_decay``, rope-vit's frequencies): decay would pull learned
        tables, biases and frequencies toward zero, a prior on positions no reference applies."""
        return {name for name, _ in self.named_parameters()}

    def embedding(self, positions: torch.Tensor) -> torch.Tensor:
        """(…, s) positions -> (…, s, d) embedding added to the input."""
        raise NotImplementedError(f"{type(self).__name__} adds no embedding")

    def rotation(self, positions: torch.Tensor, dtype: torch.dtype) -> Any:
        """Per-forward state for ``rotate_qk`` (e.g. cos and sin), computed once for all layers."""
        raise NotImplementedError(f"{type(self).__name__} does not rotate Q and K")

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, rotation: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate (b, n_h, s, h_d) queries and keys; values are never touched."""
        raise NotImplementedError(f"{type(self).__name__} does not rotate Q and K")

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        """(…, n_h, s_q, s_k) additive bias on the attention scores."""
        raise NotImplementedError(f"{type(self).__name__} adds no attention bias")

    def distance_bias(self, positions: torch.Tensor) -> torch.Tensor | None:
        """(n_h, 2s − 1) bias of each signed distance i − j = −(s − 1)..s − 1 (entry m is distance
        m − (s − 1)) when, over these (…, s) positions, ``bias(positions, positions)`` is that
        function of i − j alone, so attention can take its (s, s) blocks as strided views of one
        vector; None (the default) when it is not, and attention builds ``bias`` per block."""
        return None

    def distance_rows(
        self, q_positions: torch.Tensor, distances: torch.Tensor, out: torch.Tensor | None = None
    ) -> torch.Tensor | None:
        """(n_h, s_q, n) bias of each query at (s_q,) integer positions p against the key at p − d,
        for each of the (n,) signed distances d, when the scheme can compute that faster than
        ``bias`` blocks (a bias of i − j per query row, as FIRE's past its threshold); else None
        (the default). Attention takes its (queries, keys) blocks as strided views of these rows.
        ``out``: a float32 (n_h, s_q, n) tensor to write them into, given only without a gradient
        (attention reuses one buffer across its chunks)."""
        return None

    def score_mod(self, positions: torch.Tensor) -> ScoreMod | None:
        """A ``flex_attention`` score_mod adding ``bias(positions, positions)`` to the scores
        without an (s, s) bias in memory, or None. The default reads ``distance_bias``'s table
        (``table_score_mod``); a scheme whose bias is some other cheap function of the two
        indices (FIRE's per-row normaliser) gives its own."""
        table = self.distance_bias(positions)
        return None if table is None else table_score_mod(table)

    def key_bias(self, k_positions: torch.Tensor) -> torch.Tensor | None:
        """(…, n_h, s_k) per-key bias that equals ``bias`` under a causal mask over non-decreasing
        positions (a row constant cancels in the softmax), or None when the scheme has none
        (``has_key_bias`` says which, before any forward)."""
        return None

    def check_positions(self, positions: torch.Tensor) -> None:
        if self.max_positions is not None and positions.numel():
            top = int(positions.max())
            if top >= self.max_positions:
                raise PositionOutOfRange(
                    f"position {top} is past the {type(self).__name__} table of "
                    f"{self.max_positions} positions; train longer, shrink the length, or rescale"
                )


def default_positions(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The positions 0..s-1 of an unshifted 1D sequence, shape (s,)."""
    return torch.arange(seq_len, device=device)


def randomized_positions(
    seq_len: int,
    max_len: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """A sorted sample without replacement of ``seq_len`` positions from [0, ``max_len``), shape (s,).

    Ruoss et al. 2023, "Randomized Positional Encodings Boost Length Generalization of
    Transformers" (arXiv:2305.16843): training on such positions shows the model position values
    up to ``max_len`` while keeping their order. One sample is shared by the batch, as in the
    reference implementation (google-deepmind/randomized_positional_encodings,
    ``noisy_fixed_positional_encodings``). Drawn on the CPU from ``generator`` (default: torch's
    global generator, which a run seeds and checkpoints), then moved to ``device``.
    """
    if not 1 <= seq_len <= max_len:
        raise ConfigError(f"pe.randomized_max={max_len} must be >= the sequence length {seq_len}")
    return torch.randperm(max_len, generator=generator)[:seq_len].sort().values.to(device)


# flex_attention's score_mod: (score, batch, head, query index, key index) -> score
ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def table_score_mod(table: torch.Tensor) -> ScoreMod:
    """The score_mod adding b_h(i − j) from a (n_h, 2s − 1) table whose entry m is the distance
    m − (s − 1) (``PositionScheme.distance_bias``)."""
    offset = (table.shape[-1] - 1) // 2

    def score_mod(score, batch, head, i, j):
        return score + table[head, i - j + offset]

    return score_mod


def toeplitz_distances(positions: torch.Tensor) -> torch.Tensor | None:
    """The (2s − 1,) signed distances −(s − 1)..s − 1 of (…, s) positions that step by exactly 1
    (integers p0, p0 + 1, …; p0 may differ per batch row), where i − j of positions is the same as
    of indices; None for any other positions (float, randomized, shuffled): their distances are
    no Toeplitz matrix."""
    s = positions.shape[-1]
    if s == 0 or positions.is_floating_point() or not bool((positions.diff(dim=-1) == 1).all()):
        return None
    return torch.arange(1 - s, s, device=positions.device)


def relative_distance(q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """(…, s_q) and (…, s_k) positions -> (…, s_q, s_k) signed distances i − j (query minus key)."""
    return q_positions[..., :, None] - k_positions[..., None, :]
