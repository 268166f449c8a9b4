"""Tiny Vision Transformer: conv patch embedding, optional cls token, bidirectional blocks.

The same ``Block``, the same scheme injection and the same choice of attention
(``select_attention``, named in ``attention_backend``) as the causal LM (torchtune style); only
the mask differs (none). Positions are the (row, col) of the patches, shape (s_p, 2); the cls token
has no grid position and every patch scheme leaves it alone (``posenc.pe.grid``). A 1D learned
table is laid over the raster order with the cls row first, as in the original ViT
(Dosovitskiy et al. 2021; torchvision's ``VisionTransformer`` keeps the same layout).

Notation: b batch, C channels, P patch size, h x w patch grid, s_p = h·w patches,
s = prefix + s_p tokens, d width.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from posenc.core.errors import ConfigError
from posenc.models.blocks import Block, RMSNorm, init_weights, select_attention
from posenc.pe.base import PositionOutOfRange, PositionScheme, float32
from posenc.pe.grid import check_patch_scheme, interpolated_positions, patch_positions
from posenc.pe.learned import LearnedPE
from posenc.pe.resample import MODES, as_grid


def check_image_size(size: int, patch_size: int, where: str = "task.resolution") -> int:
    """The patch-grid side of a ``size`` px image; a size not divisible by the patch is a mistake."""
    if size < patch_size or size % patch_size:
        raise ConfigError(
            f"{where}={size} is not divisible by model.patch_size={patch_size}; use a multiple of {patch_size}"
        )
    return size // patch_size


class ViT(nn.Module):
    """Classifier over ``num_classes``; ``pool`` is ``cls`` (a prefix token) or ``mean`` (patches)."""

    takes_patches = True  # read by posenc.engine.build to reject 1D-only schemes with a hint
    trains = True

    def __init__(
        self,
        pe: PositionScheme,
        num_classes: int,
        image_size: int = 32,
        in_channels: int = 3,
        patch_size: int = 4,
        d_model: int = 128,
        n_layers: int = 4,
        n_heads: int = 4,
        mlp_hidden: int | None = None,
        pool: Literal["cls", "mean"] = "cls",
        norm_eps: float = 1e-5,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ConfigError(f"model.d_model={d_model} is not divisible by model.n_heads={n_heads}")
        if pool not in ("cls", "mean"):
            raise ConfigError(f"model.pool '{pool}' is not a pooling; valid: cls, mean")
        check_patch_scheme(pe)
        side = check_image_size(image_size, patch_size)
        self.pe, self.patch_size, self.pool = pe, patch_size, pool
        self.num_prefix_tokens = 1 if pool == "cls" else 0
        self.grid = (side, side)  # the grid the position tables (or coordinates) belong to
        self.coords = "extrapolate"  # or "interpolate": coordinates of other grids scaled onto self.grid
        if isinstance(pe, LearnedPE) and pe.max_positions < self.num_prefix_tokens + side * side:
            raise ConfigError(
                f"the learned table has {pe.max_positions} rows, the ViT needs {self.num_prefix_tokens + side * side} "
                f"({self.num_prefix_tokens} cls + {side}x{side} patches); set "
                f"pe.max_len={self.num_prefix_tokens + side * side}"
            )
        self.patch = nn.Conv2d(in_channels, d_model, kernel_size=patch_size, stride=patch_size)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model)) if pool == "cls" else None
        mlp_hidden = mlp_hidden or 32 * math.ceil(8 * d_model / 3 / 32)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, n_heads, d_model // n_heads, mlp_hidden, norm_eps) for _ in range(n_layers)
        )
        self.norm = RMSNorm(d_model, norm_eps)
        self.head = nn.Linear(d_model, num_classes)
        init_weights(self, init_std, n_layers)
        self._select_attention()  # attention_backend: the attention every forward runs

    def _select_attention(self) -> None:
        self.attention_backend: str = select_attention(self.pe, self.patch.weight.device, causal=False)

    def _apply(self, fn, recurse=True):
        """Moved to another device, the model picks the attention that device runs."""
        out = super()._apply(fn, recurse)
        self._select_attention()
        return out

    def no_weight_decay(self) -> set[str]:
        """The cls token is not decayed (timm's ``VisionTransformer.no_weight_decay``); the
        scheme declares its own parameters."""
        return {"cls"} if self.cls is not None else set()

    def positions(self, grid: tuple[int, int], device: torch.device | None = None) -> torch.Tensor:
        """(h·w, 2) positions of a grid's patches: raw, or scaled onto ``self.grid``."""
        if self.coords == "interpolate" and grid != self.grid:
            return interpolated_positions(grid, self.grid, device)
        return patch_positions(grid, device)

    def forward(self, images: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """(b, C, H, W) images, optional (s_p, 2) or (b, s_p, 2) patch positions -> (b, classes) logits."""
        b, _, height, width = images.shape
        check_image_size(height, self.patch_size, "image height")
        check_image_size(width, self.patch_size, "image width")
        x = self.patch(images)  # (b, d, h, w)
        grid = (x.shape[-2], x.shape[-1])
        x = x.flatten(2).transpose(1, 2)  # (b, s_p, d)
        if positions is None:
            positions = self.positions(grid, x.device)
        pe, n_prefix = self.pe, self.num_prefix_tokens
        if grid != self.grid and not set(pe.grid_methods) & {"extrapolate", "clip", "none"}:
            raise PositionOutOfRange(
                f"the position table is for a {self.grid[0]}x{self.grid[1]} grid, the images give "
                f"{grid[0]}x{grid[1]}; resample it first (ViT.set_resolution)"
            )
        prefix = self.cls.expand(b, -1, -1) if self.cls is not None else x[:, :0]  # (b, prefix, d)
        if isinstance(pe, LearnedPE):  # one table over [cls, raster patches]
            table = pe.embedding(torch.arange(n_prefix + grid[0] * grid[1], device=x.device)).to(x.dtype)  # (s, d)
            prefix, x = prefix + table[:n_prefix], x + table[n_prefix:]
        elif pe.adds_embedding:
            with float32(x.device):
                table = pe.embedding(positions)  # (…, s_p, d)
            x = x + table.to(x.dtype)  # (b, s_p, d)
        x = torch.cat((prefix, x), dim=1)  # (b, s, d)
        with float32(x.device):  # under autocast x is bf16/fp16; cos/sin and the bias stay in the weights' dtype
            rotation = pe.rotation(positions, self.patch.weight.dtype) if pe.rotates_qk else None
            bias = None
            if pe.adds_bias:  # the cls row and column get no bias
                bias = F.pad(pe.bias(positions, positions), (n_prefix, 0, n_prefix, 0))  # (…, n_h, s, s)
        for block in self.blocks:
            x = block(x, pe, rotation, bias, causal=False, backend=self.attention_backend)
        x = self.norm(x)
        pooled = x[:, 0] if self.pool == "cls" else x.mean(dim=1)  # (b, d)
        return self.head(pooled)  # (b, classes)

    def set_resolution(self, image_size: int, method: str, antialias: bool | None = None) -> ViT:
        """Serve ``image_size`` px images: resample tables with a mode, or pick how coordinates map.

        ``method`` is one of ``self.pe.grid_methods``: an interpolation mode for tables,
        ``extrapolate`` / ``interpolate`` for coordinate schemes, ``clip`` for relative tables.
        ``antialias`` (None: on for bilinear and bicubic, as timm) goes to ``resample_grid``
        through the scheme's own method (``resample_grid_`` of a 1D table, else ``resample_``).
        Modifies the model in place (copy it first to keep the original) and returns it.
        """
        valid = self.pe.grid_methods
        if method not in valid:
            raise ConfigError(
                f"method '{method}' does not apply to pe {type(self.pe).__name__}; valid: {', '.join(valid)}"
            )
        new = as_grid(check_image_size(image_size, self.patch_size, "resolution"))
        if method in MODES and new != self.grid:
            pe = self.pe
            if isinstance(pe, LearnedPE):  # one table over [cls, raster patches]
                n_prefix = self.num_prefix_tokens
                pe.resample_grid_(new, old_grid=self.grid, num_prefix_tokens=n_prefix, mode=method, antialias=antialias)
            else:
                pe.resample_(new, mode=method, antialias=antialias)
            self.grid = new
        self.coords = "interpolate" if method == "interpolate" else "extrapolate"
        return self

    def patch_embeddings(self) -> torch.Tensor:
        """(h·w, d) position embedding of every patch of ``self.grid`` (for the similarity analysis)."""
        if isinstance(self.pe, LearnedPE):
            n = self.num_prefix_tokens
            return self.pe.table[n : n + self.grid[0] * self.grid[1]].detach().clone()  # not a view: training moves it
        if not self.pe.adds_embedding:
            raise ConfigError(f"pe {type(self.pe).__name__} adds no embedding to compare")
        return self.pe.embedding(patch_positions(self.grid, self.patch.weight.device)).detach().clone()
