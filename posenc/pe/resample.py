"""Resample a learned position table: to another patch grid (seed claim C7), or to a longer sequence.

A ViT trained at one resolution has one table row per patch of its grid (plus prefix rows for
the cls token); at another resolution the grid changes, so the table is treated as an image with
D channels and interpolated, the prefix rows kept apart (Dosovitskiy et al. 2021, "An Image is
Worth 16x16 Words", §3.2). The same function serves a forward pass at a new resolution and the
loading of a checkpoint, as timm's ``resample_abs_pos_embed`` does. Checked against torchvision's
``models.vision_transformer.interpolate_embeddings`` (bicubic, align_corners=True, no antialias)
and timm's ``resample_abs_pos_embed`` (bicubic, antialias) in tests/pe/test_resample.py.

A table of 1D positions serves a longer sequence the same way (``resample_table``): its last row
repeated, or the table read at m·n/length (Position Interpolation, Chen et al. 2023, on a table).
The modules own the tables and call these functions (``LearnedPE.resample_``, ``resample_grid_``).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

from posenc.core.errors import ConfigError

Mode = Literal["nearest", "bilinear", "bicubic", "area"]
MODES: tuple[str, ...] = ("nearest", "bilinear", "bicubic", "area")
SMOOTH_MODES: tuple[str, ...] = (
    "bilinear",
    "bicubic",
)  # the modes F.interpolate allows align_corners and antialias for


TABLE_MODES: tuple[str, ...] = ("clamp", "linear")


def resample_table(table: torch.Tensor, length: int, mode: str = "linear") -> torch.Tensor:
    """(n, d) table of 1D positions -> the table for ``length`` positions; ``table`` itself when
    ``length`` <= n (every position already has its row).

    ``clamp``: (length, d), positions past the table reuse its last row. ``linear``: (length, d),
    row m is the table read at m·n/length, linearly between neighbouring rows.
    """
    if mode not in TABLE_MODES:
        raise ConfigError(f"unknown table resampling '{mode}'; valid: {', '.join(TABLE_MODES)}")
    n = table.shape[0]
    if length <= n:
        return table
    if mode == "clamp":
        return torch.cat((table, table[-1:].expand(length - n, -1)), dim=0)  # (length, d)
    x = torch.arange(length, dtype=torch.float64) * (n / length)  # (length,) in [0, n)
    lo = x.floor().long().clamp(max=n - 1)
    hi = (lo + 1).clamp(max=n - 1)
    w = (x - lo).to(table.dtype)[:, None]  # (length, 1)
    return table[lo] * (1 - w) + table[hi] * w  # (length, d)


def as_grid(grid: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    """``n`` -> (n, n); ``(h, w)`` stays."""
    if isinstance(grid, int):
        return grid, grid
    h, w = grid
    return int(h), int(w)


def check_mode(mode: str, antialias: bool | None = None, align_corners: bool = False) -> None:
    if mode not in MODES:
        raise ConfigError(f"unknown interpolation mode '{mode}'; valid: {', '.join(MODES)}")
    if mode not in SMOOTH_MODES and (antialias or align_corners):
        flag = "antialias" if antialias else "align_corners"
        raise ConfigError(f"{flag} needs mode bilinear or bicubic, not '{mode}'")


def resample_grid(
    embedding: torch.Tensor,
    new_grid: int | tuple[int, int],
    *,
    old_grid: int | tuple[int, int] | None = None,
    num_prefix_tokens: int = 1,
    mode: Mode = "bicubic",
    antialias: bool | None = None,
    align_corners: bool = False,
) -> torch.Tensor:
    """``[1, prefix + H·W, D]`` (or ``[prefix + H·W, D]``) table -> the same for ``new_grid``.

    Rows are in raster order (row-major); the first ``num_prefix_tokens`` rows (cls, registers)
    are returned untouched. ``old_grid`` defaults to the square grid the row count implies.
    The interpolation runs in float32 and the result has the input's dtype.

    ``antialias`` defaults (None) to on for bilinear and bicubic, as timm's
    ``resample_abs_pos_embed`` (antialias=True) does, and means nothing for nearest and area,
    which have no antialiased form (asking for it there is an error). Antialiasing low-pass
    filters when a table is shrunk, where a plain bicubic kernel samples and aliases (8 -> 4 rows
    of a unit-std table differ by up to 1.4). PyTorch's antialiased bicubic also uses the
    a = −0.5 kernel (PIL's) rather than a = −0.75, so bicubic enlargement differs slightly too
    (up to 0.3 on a unit-std table); bilinear enlargement is the same either way. Pass False
    for torchvision's ``interpolate_embeddings`` (no antialias).
    """
    check_mode(mode, antialias, align_corners)
    if antialias is None:
        antialias = mode in SMOOTH_MODES
    batched = embedding.dim() == 3
    if not batched and embedding.dim() != 2:
        raise ValueError(f"expected a [1, n, D] or [n, D] table, got shape {tuple(embedding.shape)}")
    table = embedding if batched else embedding[None]  # (1, n, D)
    if table.shape[0] != 1:
        raise ValueError(f"expected one table (batch dim 1), got shape {tuple(embedding.shape)}")
    n_patches = table.shape[1] - num_prefix_tokens
    if old_grid is None:
        side = math.isqrt(max(n_patches, 0))
        if side * side != n_patches:
            raise ValueError(f"{n_patches} patch rows are not a square grid; pass old_grid=(H, W)")
        old_grid = (side, side)
    (h, w), (new_h, new_w) = as_grid(old_grid), as_grid(new_grid)
    if h * w != n_patches:
        raise ValueError(f"old_grid {h}x{w} needs {h * w} patch rows, the table has {n_patches}")
    if (h, w) == (new_h, new_w):
        return embedding
    prefix, patches = table[:, :num_prefix_tokens], table[:, num_prefix_tokens:]
    d = patches.shape[-1]
    img = patches.float().reshape(1, h, w, d).permute(0, 3, 1, 2)  # (1, D, H, W)
    extra = {"align_corners": align_corners, "antialias": antialias} if mode in SMOOTH_MODES else {}
    img = F.interpolate(img, size=(new_h, new_w), mode=mode, **extra)  # (1, D, H', W')
    patches = img.permute(0, 2, 3, 1).reshape(1, new_h * new_w, d).to(table.dtype)  # (1, H'·W', D)
    out = torch.cat((prefix, patches), dim=1)  # (1, prefix + H'·W', D)
    return out if batched else out[0]
