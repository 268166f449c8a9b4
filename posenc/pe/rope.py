"""Rotary position embedding (Su et al. 2021, "RoFormer", arXiv:2104.09864).

Each pair of query/key dimensions is rotated by the angle m·θ_i with θ_i = base^(-2i/d), so
q_m·k_n depends on n−m alone and norms are kept (seed claim C9). Only Q and K rotate.

Two layouts pair the dimensions differently:

* ``half`` pairs i with i + d/2 (GPT-NeoX, Llama in Hugging Face transformers: ``rotate_half``);
* ``interleaved`` pairs 2i with 2i+1 (RoFormer, Meta's original Llama code).

They are the same map up to a fixed permutation of the head dimensions. ``rotary_fraction`` < 1
rotates only the first ``int(h_d · fraction)`` dimensions (GPT-NeoX, Phi). Checked against
``transformers.models.llama.modeling_llama.apply_rotary_pos_emb`` (tests/models/test_hf.py).

``Rotary`` is what a frequency scaling (``posenc.pe.scaling``) reads from and writes to any
scheme that rotates Q and K by m·θ_i: RoPE here, xPos (``posenc.pe.xpos``) too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import torch

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme

Layout = Literal["half", "interleaved"]


@runtime_checkable
class Rotary(Protocol):
    """A scheme that rotates pair i of Q and K at position m by m·θ_i, as a frequency scaling sees it.

    A scaling reads the trained frequencies from ``rot_dim`` and ``base`` (θ_i = base^(-2i/r), never
    from ``inv_freq``, so applying a scale twice is applying it once) and installs its own with
    ``set_frequencies``; the scheme keeps everything else it does (xPos its decay).
    """

    rot_dim: int  # r: the dimensions rotated, r/2 frequencies
    base: float  # θ of the trained frequencies
    inv_freq: torch.Tensor  # (r/2,) the frequencies in use
    attention_scaling: float  # the factor on cos and sin (YaRN's temperature, LongRoPE's); 1 as trained

    def set_frequencies(self, inv_freq: torch.Tensor, attention_scaling: float = 1.0) -> None:
        """Rotate by the (r/2,) ``inv_freq`` from now on, cos and sin multiplied by ``attention_scaling``."""
        ...


def checked_frequencies(current: torch.Tensor, inv_freq: torch.Tensor, scheme: str) -> torch.Tensor:
    """``inv_freq`` as the (r/2,) frequencies replacing ``current``: same shape, same dtype and device."""
    if inv_freq.shape != current.shape:
        raise ConfigError(f"{scheme} expects {current.shape[0]} frequencies, got {inv_freq.shape[0]}")
    return inv_freq.to(current)


def rope_inv_freq(rot_dim: int, base: float = 10000.0) -> torch.Tensor:
    """θ_i = base^(-2i/d) for i < d/2, float32, computed as Hugging Face does."""
    return 1.0 / (base ** (torch.arange(0, rot_dim, 2, dtype=torch.int64).float() / rot_dim))


def rope_angles(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """(…, s) positions -> (…, s, d/2) angles m·θ_i in the dtype of ``inv_freq``."""
    return positions.to(inv_freq.dtype)[..., None] * inv_freq.to(positions.device)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: Layout = "half") -> torch.Tensor:
    """Rotate the first 2·cos.shape[-1] dims of x (b, n_h, s, h_d); cos/sin are (…, s, r/2).

    Each pair (a, b) becomes (a·cos − b·sin, b·cos + a·sin), in x's dtype promoted with the table's
    (float32 tables rotate bf16 queries in float32). The pair halves are views of x written into
    one output, a multiply and a multiply-add each (``_rotate``): no flipped or concatenated copy,
    no ``rotate_half``. Backward is the rotation by −θ (``_Rotation``), so autograd keeps neither x
    nor intermediates unless the tables themselves need a gradient (learned frequencies).
    """
    if torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad):
        return _Rotation.apply(x, cos, sin, layout)
    return _rotate(x, cos, sin, layout)


def _pair_halves(x: torch.Tensor, r: int, layout: Layout) -> tuple[torch.Tensor, torch.Tensor]:
    """Views (…, r/2) of the first and second member of each rotated pair of x (…, h_d)."""
    if layout == "half":
        return x[..., : r // 2], x[..., r // 2 : r]
    return x[..., 0:r:2], x[..., 1:r:2]


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: Layout, sign: float = 1.0) -> torch.Tensor:
    """``apply_rope``'s map without autograd; ``sign`` −1 rotates by −θ."""
    r = 2 * cos.shape[-1]
    if cos.dim() == 3:  # (b, s, r/2) -> (b, 1, s, r/2) to broadcast over heads
        cos, sin = cos[:, None], sin[:, None]
    out = torch.empty_like(x, dtype=torch.promote_types(x.dtype, cos.dtype))  # x's strides (Q/K projection layout)
    (a, b), (out_a, out_b) = _pair_halves(x, r, layout), _pair_halves(out, r, layout)
    torch.mul(a, cos, out=out_a).addcmul_(b, sin, value=-sign)  # a·cos − b·sin
    torch.mul(b, cos, out=out_b).addcmul_(a, sin, value=sign)  # b·cos + a·sin
    if r < x.shape[-1]:
        out[..., r:] = x[..., r:]  # partial rotary: the rest passes through
    return out


class _Rotation(torch.autograd.Function):
    """``_rotate`` with its transpose as backward: the gradient of x is the gradient rotated by −θ;
    the tables' gradients (learned frequencies) are the pairs' products summed to their shape."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: Layout) -> torch.Tensor:
        tables = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        ctx.save_for_backward(cos, sin, x if tables else None)
        ctx.layout, ctx.x_dtype = layout, x.dtype
        return _rotate(x, cos, sin, layout)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        cos, sin, x = ctx.saved_tensors
        grad_x = _rotate(grad, cos, sin, ctx.layout, sign=-1.0).to(ctx.x_dtype) if ctx.needs_input_grad[0] else None
        grad_cos = grad_sin = None
        if x is not None:
            r = 2 * cos.shape[-1]
            (a, b), (g_a, g_b) = _pair_halves(x, r, ctx.layout), _pair_halves(grad, r, ctx.layout)
            wide = (cos[:, None] if cos.dim() == 3 else cos).shape  # as _rotate broadcast it
            grad_cos = (g_a * a + g_b * b).sum_to_size(wide).reshape(cos.shape)
            grad_sin = (g_b * a - g_a * b).sum_to_size(wide).reshape(sin.shape)
        return grad_x, grad_cos, grad_sin, None


class RoPE(PositionScheme):
    """Rotary embedding for 1D positions.

    cos/sin of integer positions come from a table computed once per length, dtype and device
    and grown on demand; float positions (after rescaling) are computed directly. Angles are
    float32 (as in Hugging Face) unless float64 is asked for.
    """

    rotates_qk = True
    encodes = "relative"
    counterpart = "rope2d_axial"

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        layout: Layout = "half",
        rotary_fraction: float = 1.0,
        randomized: bool = False,
        randomized_max: int = 2048,
        nope_layers: Sequence[int] = (),
    ) -> None:
        """``nope_layers``: indices of the model's layers whose attention gets no rotation (RoPE in
        some layers only, as Llama 4's iRoPE and SmolLM3 leave every fourth layer without it)."""
        super().__init__()
        if not 0.0 < rotary_fraction <= 1.0:
            raise ConfigError(f"pe.rotary_fraction must be in (0, 1], got {rotary_fraction}")
        rot_dim = int(head_dim * rotary_fraction)
        if rot_dim % 2 or rot_dim == 0:
            raise ConfigError(
                f"rope needs an even rotary dimension, but head_dim={head_dim} x "
                f"rotary_fraction={rotary_fraction} gives {rot_dim}; pick d_model / n_heads even"
            )
        if base <= 1.0:
            raise ConfigError(f"pe.base must be > 1, got {base}")
        self.head_dim, self.rot_dim, self.base, self.layout = head_dim, rot_dim, base, layout
        if any(int(i) < 0 for i in nope_layers):
            raise ConfigError(f"pe.nope_layers are layer indices >= 0, got {list(nope_layers)}")
        self.nope_layers = tuple(sorted({int(i) for i in nope_layers}))
        self.attention_scaling = 1.0
        self.register_buffer("inv_freq", rope_inv_freq(rot_dim, base), persistent=False)
        self._tables: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self.set_randomized(randomized, randomized_max)

    def _freqs(self, dtype: torch.dtype) -> torch.Tensor:
        # float32 angles as Hugging Face computes them; float64 when asked, for exact checks
        return self.inv_freq.double() if dtype == torch.float64 else self.inv_freq.float()

    def _table(self, length: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        key = (dtype, device)
        cached = self._tables.get(key)
        if cached is None or cached[0].shape[0] < length:
            size = max(length, 2 * cached[0].shape[0] if cached is not None else length)
            angles = rope_angles(torch.arange(size, device=device), self._freqs(dtype))  # (n, r/2)
            cached = (
                (angles.cos() * self.attention_scaling).to(dtype),
                (angles.sin() * self.attention_scaling).to(dtype),
            )
            self._tables[key] = cached
        return cached

    def rotation(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        if positions.is_floating_point():
            angles = rope_angles(positions, self._freqs(dtype))
            return (
                (angles.cos() * self.attention_scaling).to(dtype),
                (angles.sin() * self.attention_scaling).to(dtype),
            )
        cos, sin = self._table(int(positions.max()) + 1, dtype, positions.device)
        return cos[positions], sin[positions]  # (…, s, r/2)

    def set_frequencies(self, inv_freq: torch.Tensor, attention_scaling: float = 1.0) -> None:
        """Install (r/2,) rescaled frequencies and the factor on cos/sin (posenc.pe.rope_scaling)."""
        self.inv_freq = checked_frequencies(self.inv_freq, inv_freq, "rope")  # float32 whatever the model's dtype
        self.attention_scaling = float(attention_scaling)
        self._tables = {}  # cos/sin of the old frequencies

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, rotation) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = rotation
        return apply_rope(q, cos, sin, self.layout), apply_rope(k, cos, sin, self.layout)

    def _apply(self, fn, recurse=True):
        """Moves follow the module; casts leave the frequencies float32 (or float64), as Hugging
        Face keeps ``inv_freq``: a bf16 ``inv_freq`` moves every angle by up to 0.4%."""
        self._tables = {}  # moved to another device or dtype: recompute on demand
        freqs = self.inv_freq
        out = super()._apply(fn, recurse)
        wide = freqs.dtype if freqs.dtype in (torch.float32, torch.float64) else torch.float32
        self._buffers["inv_freq"] = freqs.to(device=self.inv_freq.device, dtype=wide)
        return out
