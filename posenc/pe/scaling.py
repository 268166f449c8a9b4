"""Rescaling a trained position scheme for evaluation at another length (``configs/scale/``).

A scale is built from its config, checked against the scheme (``check``) before any work, and
applied to a trained scheme for one evaluated length (``apply``), in place: rotary scales install
new frequencies (``posenc.pe.rope_scaling``) in any scheme that is ``Rotary`` (RoPE, xPos), table
scales ask a learned table to resample itself (``LearnedPE.resample_``). ``none`` leaves every
scheme as trained. The factor, when not given, is
max(1, evaluated length / ``original_length``), so at or below the training length every scale
is the identity; LongRoPE instead takes s = ``max_position`` / ``original_length``, one fixed
factor at every length as Hugging Face does, and its ``short_factor`` applies at every length.

Facts on each class: ``hf_rope_type`` is Hugging Face's ``rope_type`` for the same rescaling
(None: Hugging Face has none), ``length_dependent`` says the frequencies depend on the evaluated
length beyond the factor (dynamic NTK; LongRoPE's short/long switch), so a loaded model must
re-apply the scale at every forward pass. A scale's parameters are its dataclass fields, named as
in Hugging Face's ``rope_parameters`` (but ``original_length``), so a loader reads them from the
fields; ``hf_trained_length`` is the Hugging Face key that holds the trained length. Each scale
writes itself into a Hugging Face config (``hf_rope_parameters``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from posenc.core.errors import ConfigError
from posenc.pe import rope_scaling
from posenc.pe.base import PositionScheme
from posenc.pe.learned import LearnedPE
from posenc.pe.rope import Rotary

# Hugging Face's description of a scale: its ``rope_parameters`` and ``max_position_embeddings``
HFRope = tuple[dict[str, Any], int]


class NoScale:
    """Evaluate the scheme as trained (a learned table past its length is an error)."""

    acts_on: ClassVar[str] = "every scheme"
    hf_rope_type: ClassVar[str | None] = "default"
    length_dependent: ClassVar[bool] = False
    whole_head: ClassVar[bool] = False  # a loaded model's RoPE spans the whole head (the scale takes the fraction)
    requires: ClassVar[tuple[str, ...]] = ()  # parameters with no default: `all` skips the scale without them

    @classmethod
    def applies(cls, pe: PositionScheme) -> bool:
        return True

    def check(self, pe: PositionScheme) -> None:
        if not self.applies(pe):
            raise ConfigError(f"this scale rescales {self.acts_on}, not {type(pe).__name__}")

    def apply(self, pe: PositionScheme, length: int) -> None:
        """Rescale ``pe`` in place for a forward pass over ``length`` positions."""

    def hf_rope_parameters(self, base: dict[str, Any], rot_dim: int, length: int) -> HFRope | None:
        """The Hugging Face ``rope_parameters`` and ``max_position_embeddings`` that give this
        scale's frequencies on a model whose own RoPE settings are ``base``
        (``posenc.models.hf.rope_parameters``), r = ``rot_dim`` dimensions rotated, for ``length``
        tokens; None: nothing to write, the config stays as it is."""
        return None


def _kept(base: dict[str, Any]) -> dict[str, Any]:
    """What a rescaled config keeps of the model's own RoPE settings besides θ."""
    return {k: v for k, v in base.items() if k == "partial_rotary_factor"}


def _on_default_rope(scale: NoScale, base: dict[str, Any]) -> None:
    if base["rope_type"] != "default":
        raise ConfigError(
            f"cannot describe '{type(scale).__name__}' on top of the shipped rope_type "
            f"'{base['rope_type']}' in one Hugging Face config"
        )


def _check_positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ConfigError(f"scale.{name} must be > 0, got {value}")


@dataclass
class RopeScale(NoScale):
    """Shared by the rotary scales: a factor (None: from the length) and the trained length."""

    acts_on: ClassVar[str] = "the frequencies of a rotary scheme (pe=rope, pe=xpos)"
    hf_rope_type: ClassVar[str | None] = None
    hf_trained_length: ClassVar[str] = "original_max_position_embeddings"
    factor: float | None = None
    original_length: int = 128

    def __post_init__(self) -> None:
        _check_positive("factor", self.factor)
        if self.original_length < 1:
            raise ConfigError(f"scale.original_length must be >= 1, got {self.original_length}")

    @classmethod
    def applies(cls, pe: PositionScheme) -> bool:
        return isinstance(pe, Rotary)

    def factor_for(self, length: int) -> float:
        return self.factor if self.factor is not None else max(1.0, length / self.original_length)

    def frequencies(self, rot_dim: int, base: float, length: int) -> rope_scaling.Frequencies:
        raise NotImplementedError

    def apply(self, pe: PositionScheme, length: int) -> None:
        pe.set_frequencies(*self.frequencies(pe.rot_dim, pe.base, length))  # pe is Rotary (``applies``)

    def hf_rope_parameters(self, base: dict[str, Any], rot_dim: int, length: int) -> HFRope | None:
        """``hf_rope_type`` with this scale's fields under their Hugging Face names, on a model
        with the default RoPE; the trained length to ``max_position_embeddings`` where Hugging Face
        reads it there (linear, dynamic), else to ``original_max_position_embeddings`` with
        ``max_position_embeddings`` the factor times it (Hugging Face's implicit factor agrees)."""
        _on_default_rope(self, base)
        if self.hf_rope_type is None:
            raise ConfigError(f"scale '{type(self).__name__}' has no Hugging Face rope_type")
        factor = self.factor_for(length)
        given = {
            n: getattr(self, n)
            for n in scale_parameters(type(self))
            if n not in ("factor", "original_length") and getattr(self, n) is not None
        }
        params = {**_kept(base), "rope_type": self.hf_rope_type, "rope_theta": float(base["rope_theta"])}
        params.update(factor=factor, **given)
        if self.hf_trained_length == "max_position_embeddings":
            return params, self.original_length
        params["original_max_position_embeddings"] = self.original_length
        return params, round(factor * self.original_length)


@dataclass
class PI(RopeScale):
    """Position Interpolation (Chen et al. 2023): θ_i / s."""

    hf_rope_type = "linear"
    hf_trained_length = "max_position_embeddings"

    def frequencies(self, rot_dim: int, base: float, length: int) -> rope_scaling.Frequencies:
        return rope_scaling.linear_frequencies(rot_dim, base, self.factor_for(length))

    def hf_rope_parameters(self, base: dict[str, Any], rot_dim: int, length: int) -> HFRope | None:
        """On a shipped linear scaling PI stacks: one linear factor, the product of the two."""
        if base["rope_type"] != "linear":
            return super().hf_rope_parameters(base, rot_dim, length)
        factor = base["factor"] * self.factor_for(length)
        return {**_kept(base), "rope_type": "linear", "rope_theta": float(base["rope_theta"]), "factor": factor}, length


@dataclass
class NTK(RopeScale):
    """Static NTK-aware base change: base · s^(r/(r−2)) (Hugging Face has no such rope_type)."""

    def frequencies(self, rot_dim: int, base: float, length: int) -> rope_scaling.Frequencies:
        return rope_scaling.ntk_frequencies(rot_dim, base, self.factor_for(length))

    def hf_rope_parameters(self, base: dict[str, Any], rot_dim: int, length: int) -> HFRope | None:
        """The default RoPE with the NTK base θ · s^(r/(r−2))."""
        _on_default_rope(self, base)
        theta = float(base["rope_theta"]) * self.factor_for(length) ** (rot_dim / (rot_dim - 2))
        return {**_kept(base), "rope_type": "default", "rope_theta": theta}, length


@dataclass
class DynamicNTK(RopeScale):
    """Dynamic NTK: the base recomputed for each evaluated length; ``factor`` is Hugging Face's
    multiplier (1: exactly the NTK base for s = length / original_length)."""

    hf_rope_type = "dynamic"
    hf_trained_length = "max_position_embeddings"
    length_dependent = True

    factor: float | None = 1.0

    def frequencies(self, rot_dim: int, base: float, length: int) -> rope_scaling.Frequencies:
        return rope_scaling.dynamic_frequencies(rot_dim, base, self.factor or 1.0, self.original_length, length)


@dataclass
class YaRN(RopeScale):
    """YaRN (Peng et al. 2023): NTK-by-parts ramp between beta_fast and beta_slow, temperature."""

    hf_rope_type = "yarn"

    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True
    attention_factor: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_positive("attention_factor", self.attention_factor)
        if self.beta_fast < self.beta_slow:
            raise ConfigError(f"scale.beta_fast={self.beta_fast} must be >= scale.beta_slow={self.beta_slow}")

    def frequencies(self, rot_dim: int, base: float, length: int) -> rope_scaling.Frequencies:
        return rope_scaling.yarn_frequencies(
            rot_dim,
            base,
            self.factor_for(length),
            self.original_length,
            self.beta_fast,
            self.beta_slow,
            self.mscale,
            self.mscale_all_dim,
            self.truncate,
            self.attention_factor,
        )


@dataclass
class Llama3(RopeScale):
    """Llama 3.1: interpolate long wavelengths, keep short ones, smooth band between."""

    hf_rope_type = "llama3"

    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.high_freq_factor <= self.low_freq_factor:
            raise ConfigError(
                f"scale.high_freq_factor={self.high_freq_factor} must be > scale.low_freq_factor={self.low_freq_factor}"
            )

    def frequencies(self, rot_dim: int, base: float, length: int) -> rope_scaling.Frequencies:
        return rope_scaling.llama3_frequencies(
            rot_dim, base, self.factor_for(length), self.original_length, self.low_freq_factor, self.high_freq_factor
        )


@dataclass
class LongRoPE(RopeScale):
    """LongRoPE (Ding et al. 2024): per-frequency factors, ``long_factor`` past the trained length.

    Without ``factor``, s = ``max_position`` / ``original_length`` (Hugging Face's
    ``max_position_embeddings / original_max_position_embeddings``; ``max_position`` null means
    the original length, so s = 1), and the attention factor √(1 + ln s / ln L₀) it gives is the
    same at every evaluated length, as in transformers' ``_compute_longrope_parameters``.
    """

    hf_rope_type = "longrope"
    length_dependent = True
    requires: ClassVar[tuple[str, ...]] = ("short_factor", "long_factor")  # no default exists
    short_factor: Sequence[float] | None = None
    long_factor: Sequence[float] | None = None
    attention_factor: float | None = None
    max_position: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_positive("attention_factor", self.attention_factor)
        if self.max_position is not None and self.max_position < 1:
            raise ConfigError(f"scale.max_position must be >= 1 or null, got {self.max_position}")
        for name in ("short_factor", "long_factor"):
            values = getattr(self, name)
            if not values:
                raise ConfigError(f"scale longrope needs scale.{name}: a list of one factor per rotary frequency")
            if any(not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0) for v in values):
                raise ConfigError(f"scale.{name} must hold positive numbers, got {list(values)}")

    def check(self, pe: PositionScheme) -> None:
        super().check(pe)
        for name in ("short_factor", "long_factor"):
            n = len(getattr(self, name))
            if n != pe.rot_dim // 2:
                raise ConfigError(
                    f"scale.{name} has {n} factors, but the rotary dimension {pe.rot_dim} has "
                    f"{pe.rot_dim // 2} frequencies; give {pe.rot_dim // 2} factors"
                )

    def factor_for(self, length: int) -> float:
        if self.factor is not None:
            return self.factor
        return (self.max_position or self.original_length) / self.original_length

    def hf_rope_parameters(self, base: dict[str, Any], rot_dim: int, length: int) -> HFRope | None:
        """As every rotary scale, but ``max_position`` is no rope parameter: Hugging Face carries it
        as ``max_position_embeddings`` itself (the factor times the trained length)."""
        params, max_pos = super().hf_rope_parameters(base, rot_dim, length)
        params.pop("max_position", None)
        return params, max_pos

    def frequencies(self, rot_dim: int, base: float, length: int) -> rope_scaling.Frequencies:
        return rope_scaling.longrope_frequencies(
            rot_dim,
            base,
            self.factor_for(length),
            self.original_length,
            self.short_factor,
            self.long_factor,
            seq_len=length,
            attention_factor=self.attention_factor,
        )


@dataclass
class Proportional(RopeScale):
    """p-RoPE (Barbero et al. 2024, "Round and Round We Go!", arXiv:2410.06205), Hugging Face's
    ``proportional`` rope type: the first ``partial_rotary_factor`` of the r/2 pairs rotate at
    θ_i = base^(-2i/r), r the whole rotary dimension, the slowest pairs not at all; every frequency
    divided by the factor. A loaded model's RoPE spans the whole head under it (``whole_head``)."""

    hf_rope_type = "proportional"
    hf_trained_length = "max_position_embeddings"
    whole_head: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("partial_rotary_factor",)  # no default exists
    partial_rotary_factor: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        p = self.partial_rotary_factor
        if p is None or not 0.0 < p <= 1.0:
            raise ConfigError(
                f"scale proportional needs scale.partial_rotary_factor in (0, 1], the fraction of pairs that rotate; "
                f"got {p}"
            )

    def frequencies(self, rot_dim: int, base: float, length: int) -> rope_scaling.Frequencies:
        return rope_scaling.proportional_frequencies(rot_dim, base, self.partial_rotary_factor, self.factor_for(length))


class _TableScale(NoScale):
    acts_on: ClassVar[str] = "learned position tables (pe=learned)"
    hf_rope_type: ClassVar[str | None] = None
    mode: ClassVar[str]  # posenc.pe.resample.resample_table's mode

    @classmethod
    def applies(cls, pe: PositionScheme) -> bool:
        return isinstance(pe, LearnedPE)

    def apply(self, pe: PositionScheme, length: int) -> None:
        pe.resample_(length, self.mode)  # pe is a LearnedPE (``applies``)

    def hf_rope_parameters(self, base: dict[str, Any], rot_dim: int, length: int) -> HFRope | None:
        raise ConfigError(f"scale '{type(self).__name__}' has no Hugging Face rope_type")


class TableClamp(_TableScale):
    """Positions past a learned table reuse its last row."""

    mode = "clamp"


class TableInterpolate(_TableScale):
    """A learned table linearly interpolated to the evaluated length."""

    mode = "linear"


def hf_scale_classes() -> dict[str, type[NoScale]]:
    """Every scale class (posenc's and any imported subclass) by its ``hf_rope_type``; the first
    defined wins, so a subclass that inherits a name does not take it over."""
    classes: dict[str | None, type[NoScale]] = {}
    queue = [NoScale]
    while queue:
        cls = queue.pop(0)
        classes.setdefault(cls.hf_rope_type, cls)
        queue += cls.__subclasses__()
    classes.pop(None, None)
    return classes  # type: ignore[return-value]


def scale_parameters(cls: type[NoScale]) -> tuple[str, ...]:
    """The parameters a scale class declares (its dataclass fields; none for a table scale)."""
    return tuple(f.name for f in fields(cls)) if hasattr(cls, "__dataclass_fields__") else ()
