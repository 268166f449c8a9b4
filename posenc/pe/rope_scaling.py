"""RoPE rescaling: new inverse frequencies and an attention factor for a longer context.

Every function returns ``(inv_freq, attention_factor)``: ``inv_freq`` is the (r/2,) float32
θ_i of a rotary dimension r, and ``attention_factor`` multiplies cos and sin (so q·k scales by
its square). ``factor`` is s = new length / original length; ``original_length`` is the length
the model was trained at (``original_max_position_embeddings`` in Hugging Face configs).

* ``linear`` — Position Interpolation (Chen et al. 2023, arXiv:2306.15595): θ_i / s.
* ``ntk`` — static NTK-aware base change (bloc97, 2023): base · s^(r/(r−2)).
* ``dynamic`` — dynamic NTK (emozilla, 2023): the NTK base change recomputed for the length
  being evaluated, base · (s·L/L₀ − (s − 1))^(r/(r−2)); no change up to L₀.
* ``yarn`` — NTK-by-parts + temperature (Peng et al. 2023, "YaRN", arXiv:2309.00071, §3.2–3.4):
  a linear ramp between the dimensions that turn ``beta_fast`` and ``beta_slow`` times over L₀
  mixes interpolated and original frequencies; attention factor 0.1·ln s + 1.
* ``llama3`` — Llama 3.1's by-wavelength interpolation (low/high frequency factors).
* ``longrope`` — LongRoPE (Ding et al. 2024, arXiv:2402.13753): one rescale factor per
  frequency, ``long_factor`` past L₀ and ``short_factor`` within it; attention factor
  √(1 + ln s / ln L₀).
* ``proportional`` — θ_i over the whole head dimension, zero frequency (no rotation) for the
  pairs past the rotary fraction, divided by s (Gemma-style partial rotary).

Each is checked against ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` (transformers
5.x) for inv_freq, attention factor and the resulting cos/sin in tests/pe/test_rope_scaling.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from posenc.pe.rope import rope_inv_freq

Frequencies = tuple[torch.Tensor, float]


def linear_frequencies(rot_dim: int, base: float, factor: float) -> Frequencies:
    """Position Interpolation: every frequency divided by the factor."""
    return rope_inv_freq(rot_dim, base) / factor, 1.0


def ntk_frequencies(rot_dim: int, base: float, factor: float) -> Frequencies:
    """NTK-aware: a larger base so the lowest frequency is interpolated by s, the highest kept."""
    return rope_inv_freq(rot_dim, base * factor ** (rot_dim / (rot_dim - 2))), 1.0


def dynamic_frequencies(rot_dim: int, base: float, factor: float, original_length: int, seq_len: int) -> Frequencies:
    """Dynamic NTK for a forward pass over ``seq_len`` positions (unchanged up to L₀)."""
    # in float32, as transformers does in the forward pass (its length is a tensor there)
    ratio = factor * torch.tensor(max(seq_len, original_length)) / original_length - (factor - 1)
    scaled = base * ratio ** (rot_dim / (rot_dim - 2))
    return 1.0 / scaled ** (torch.arange(0, rot_dim, 2, dtype=torch.int64).float() / rot_dim), 1.0


def yarn_attention_factor(factor: float, mscale: float | None = None, mscale_all_dim: float | None = None) -> float:
    """0.1·ln s + 1 (YaRN eq. 22), or the DeepSeek ratio mscale(s, m) / mscale(s, m_all)."""

    def get(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if mscale and mscale_all_dim:
        return float(get(factor, mscale) / get(factor, mscale_all_dim))
    return get(factor)


def yarn_ramp(
    rot_dim: int, base: float, original_length: int, beta_fast: float, beta_slow: float, truncate: bool = True
) -> torch.Tensor:
    """(r/2,) weight of the interpolated frequency: 0 for dims that turn > beta_fast times over
    L₀ (kept), 1 for dims that turn < beta_slow times (interpolated), linear in between."""

    def dim_for(rotations: float) -> float:  # the dimension that turns `rotations` times over L₀
        return rot_dim * math.log(original_length / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_for(beta_fast), dim_for(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rot_dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    return ((torch.arange(rot_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)


def yarn_frequencies(
    rot_dim: int,
    base: float,
    factor: float,
    original_length: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
    truncate: bool = True,
    attention_factor: float | None = None,
) -> Frequencies:
    """YaRN: original frequencies for fast dims, θ_i / s for slow ones, a ramp in between."""
    pos_freqs = base ** (torch.arange(0, rot_dim, 2).float() / rot_dim)
    extrapolated, interpolated = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    ramp = yarn_ramp(rot_dim, base, original_length, beta_fast, beta_slow, truncate)
    inv_freq = interpolated * ramp + extrapolated * (1 - ramp)
    if attention_factor is None:
        attention_factor = yarn_attention_factor(factor, mscale, mscale_all_dim)
    return inv_freq, float(attention_factor)


def llama3_frequencies(
    rot_dim: int,
    base: float,
    factor: float,
    original_length: int,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
) -> Frequencies:
    """Wavelengths above L₀/low_freq_factor are interpolated by s, those below
    L₀/high_freq_factor kept, the band between smoothly mixed."""
    inv_freq = rope_inv_freq(rot_dim, base)
    wavelen = 2 * math.pi / inv_freq
    low_wavelen, high_wavelen = original_length / low_freq_factor, original_length / high_freq_factor
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_length / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled), 1.0


def longrope_attention_factor(factor: float, original_length: int) -> float:
    return 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original_length))


def longrope_frequencies(
    rot_dim: int,
    base: float,
    factor: float,
    original_length: int,
    short_factor: Sequence[float],
    long_factor: Sequence[float],
    seq_len: int | None = None,
    attention_factor: float | None = None,
) -> Frequencies:
    """θ_i / λ_i with λ = ``long_factor`` when ``seq_len`` > L₀, else ``short_factor``."""
    lambdas = long_factor if seq_len is not None and seq_len > original_length else short_factor
    exponent = torch.arange(0, rot_dim, 2, dtype=torch.int64).float() / rot_dim
    inv_freq = 1.0 / (torch.tensor(list(lambdas), dtype=torch.float32) * base**exponent)
    if attention_factor is None:
        attention_factor = longrope_attention_factor(factor, original_length)
    return inv_freq, float(attention_factor)


def proportional_frequencies(head_dim: int, base: float, rotary_fraction: float, factor: float = 1.0) -> Frequencies:
    """(h_d/2,) frequencies base^(-2i/h_d) for the rotated pairs, 0 for the rest, divided by s."""
    n_rot = int(rotary_fraction * head_dim // 2)
    rotated = 1.0 / base ** (torch.arange(0, 2 * n_rot, 2, dtype=torch.int64).float() / head_dim)
    inv_freq = torch.cat((rotated, torch.zeros(head_dim // 2 - n_rot)))
    return inv_freq / factor, 1.0
