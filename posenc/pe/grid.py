"""Positions of image patches and the rules that tie schemes to models.

A patch's position is its (row, col) on the grid, raster order (row-major), shape (s, 2). Prefix
tokens (the cls token) have no grid position: the ViT passes the positions of its patches only,
and every patch scheme leaves the tokens in front of them alone (no embedding, no rotation,
zero bias), so the cls token is never rotated and keeps its own row.

At another resolution a scheme either keeps the raw coordinates of the new grid
(``extrapolate``; ``clip`` for relative tables, whose offsets are clamped) or moves the trained
coordinate system onto it (seed claim C12): tables are resampled with an interpolation mode,
coordinates are scaled to the trained grid (``interpolate``).
"""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError
from posenc.pe.base import PositionScheme
from posenc.pe.resample import MODES, as_grid

COORDINATE_METHODS = ("extrapolate", "interpolate")
METHODS = (*MODES, "clip", *COORDINATE_METHODS, "none")


def patch_positions(grid: int | tuple[int, int], device: torch.device | str | None = None) -> torch.Tensor:
    """(H·W, 2) integer (row, col) of every patch in raster order."""
    h, w = as_grid(grid)
    rows, cols = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")
    return torch.stack((rows.flatten(), cols.flatten()), dim=-1)  # (H·W, 2)


def interpolated_positions(
    grid: int | tuple[int, int], trained: int | tuple[int, int], device: torch.device | str | None = None
) -> torch.Tensor:
    """(H·W, 2) float (row, col) of a new grid's patch centres on the trained grid.

    Centre to centre, as ``F.interpolate(align_corners=False)`` maps pixels: i -> (i + ½)·H₀/H − ½.
    """
    (h, w), (h0, w0) = as_grid(grid), as_grid(trained)
    scale = torch.tensor([h0 / h, w0 / w], dtype=torch.float32, device=device)
    return (patch_positions((h, w), device).float() + 0.5) * scale - 0.5  # (H·W, 2)


def fits_patches(scheme: type[PositionScheme]) -> bool:
    """Whether a scheme class serves the ViT's patch grid: a 2D scheme, NoPE, or a 1D scheme
    that can serve a grid (``grid_methods``: a learned table laid over the raster order)."""
    return scheme.ndim == 2 or scheme.encodes == "nothing" or scheme.grid_methods != ("none",)


def _fix(scheme: type[PositionScheme], model: str) -> str:
    return f"use pe={scheme.counterpart}" if scheme.counterpart else f"use a {model} scheme (posenc list pe)"


def check_scheme_fits(scheme: type[PositionScheme], option: str, patches: bool) -> None:
    """A 1D-only option on the ViT or a 2D option on the LM is a user mistake: name the fix
    (the class's ``counterpart``)."""
    if patches and not fits_patches(scheme):
        raise ConfigError(f"pe '{option}' is 1D-only and does not fit the ViT's patch grid; {_fix(scheme, '2D')}")
    if not patches and scheme.ndim != 1:
        raise ConfigError(f"pe '{option}' is a 2D scheme for ViT patches; on the causal LM {_fix(scheme, '1D')}")


def check_patch_scheme(pe: PositionScheme) -> None:
    """The ViT takes a 2D scheme, NoPE, or a 1D learned table laid over the raster order."""
    check_scheme_fits(type(pe), type(pe).__name__, patches=True)


def split_prefix(x: torch.Tensor, n_patches: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(…, s, ·) -> the prefix tokens (…, s − n, ·) and the patch tokens (…, n, ·)."""
    p = x.shape[-2] - n_patches
    return x[..., :p, :], x[..., p:, :]
