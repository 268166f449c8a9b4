"""Synthetic images rendered at any resolution from a seed (so the same task exists at 16..64 px).

A scene is a list of continuous parameters (shape, centre, radius, colour in units of the image
side), drawn from a generator; rendering samples it at a resolution, 2x supersampled. Labels:

* ``quadrant``: which quadrant the object's centre is in (4 classes) — position only;
* ``above``: is the red object above the blue one (2 classes) — relative position only;
* ``left``: is the red object left of the blue one (2 classes) — relative position only;
* ``shape``: square, circle, triangle or cross (4 classes) — content only.

Without positions a ViT sees a bag of patches, so it is at chance on the first three and not on
the last (seed claim C1).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from posenc.core.errors import ConfigError
from posenc.tasks.base import SPLITS, EvalSplit, ImageTask, stream_seed

Label = Literal["quadrant", "above", "left", "shape"]
LABELS: dict[str, int] = {"quadrant": 4, "above": 2, "left": 2, "shape": 4}
RED, BLUE = (0.9, 0.2, 0.2), (0.2, 0.4, 0.95)


def shape_masks(kind: torch.Tensor, cy: torch.Tensor, cx: torch.Tensor, r: torch.Tensor, res: int) -> torch.Tensor:
    """(n,) shape ids (0 square, 1 circle, 2 triangle, 3 cross), centres and radii -> (n, res, res) masks."""
    u = (torch.arange(res, dtype=torch.float32) + 0.5) / res
    y, x = u[None, :, None], u[None, None, :]  # (1, res, 1), (1, 1, res)
    dy, dx = y - cy[:, None, None], x - cx[:, None, None]  # (n, res, res) by broadcasting
    r = r[:, None, None]
    square = (dx.abs() <= r) & (dy.abs() <= r)
    circle = dx**2 + dy**2 <= r**2
    triangle = (dy.abs() <= r) & (dx.abs() <= (dy + r) / 2)  # apex up
    cross = ((dx.abs() <= r / 3) & (dy.abs() <= r)) | ((dy.abs() <= r / 3) & (dx.abs() <= r))
    masks = torch.stack((square, circle, triangle, cross))  # (4, n, res, res)
    return masks[kind, torch.arange(len(kind))].float()  # (n, res, res)


class ShapesTask(ImageTask):
    """Scenes drawn fresh for every training batch; a fixed validation set of ``val_size`` scenes."""

    in_channels = 3

    @property
    def order_labels(self) -> bool:
        """Whether the label depends only on where things are, not on what they are: a ViT
        without positions sees a bag of patches and is at chance (``posenc order`` reads it)."""
        return self.label != "shape"

    def __init__(
        self, label: Label = "quadrant", resolution: int = 32, val_size: int = 512, noise: float = 0.05, seed: int = 0
    ) -> None:
        if label not in LABELS:
            raise ConfigError(f"task.label '{label}' is not a label; valid: {', '.join(LABELS)}")
        if resolution < 4:
            raise ConfigError(f"task.resolution must be >= 4 px, got {resolution}")
        if val_size < 1:
            raise ConfigError(f"task.val_size must be >= 1, got {val_size}")
        self.label, self.resolution, self.val_size, self.noise, self.seed = label, resolution, val_size, noise, seed
        self.num_classes = LABELS[label]
        self.name = f"shapes-{label}"
        # validation and test scenes from streams of their own (validation's as it always was)
        self._held_out = {
            split: self.scenes(val_size, torch.Generator().manual_seed(self._seed(split, 1))) for split in SPLITS
        }

    def _seed(self, split: EvalSplit, part: int) -> int:
        """The seed of a held-out split's scenes (part 1) or noise (part 2)."""
        return 10_007 * self.seed + part if split == "val" else stream_seed(self.name, self.seed, split, part)

    def scenes(self, n: int, g: torch.Generator) -> dict[str, torch.Tensor]:
        """Continuous parameters of ``n`` scenes (positions in [0, 1]) and their labels."""

        def rand(*shape: int) -> torch.Tensor:
            return torch.rand(*shape, generator=g)

        r = 0.12 + 0.08 * rand(n, 2)  # radii, a fraction of the side
        kind = torch.randint(0, 4, (n, 2), generator=g)
        bg = 0.15 * rand(n, 3)
        colour = torch.stack(
            (0.5 + 0.5 * rand(n, 3), torch.tensor(RED).expand(n, 3), torch.tensor(BLUE).expand(n, 3)), 1
        )
        if self.label in ("quadrant", "shape"):
            label = torch.randint(0, 4, (n,), generator=g)
            if self.label == "quadrant":  # centre inside the quadrant, clear of the midlines
                qy, qx = (label // 2).float(), (label % 2).float()
                cy = 0.5 * qy + 0.05 + r[:, 0] + (0.45 - 2 * r[:, 0] - 0.05).clamp(min=0) * rand(n)
                cx = 0.5 * qx + 0.05 + r[:, 0] + (0.45 - 2 * r[:, 0] - 0.05).clamp(min=0) * rand(n)
            else:
                kind[:, 0] = label
                cy, cx = r[:, 0] + (1 - 2 * r[:, 0]) * rand(n), r[:, 0] + (1 - 2 * r[:, 0]) * rand(n)
            return {
                "kind": kind[:, :1],
                "cy": cy[:, None],
                "cx": cx[:, None],
                "r": r[:, :1],
                "colour": colour[:, :1],
                "bg": bg,
                "label": label,
            }
        # two objects, red then blue, in opposite halves along the labelled axis
        label = torch.randint(0, 2, (n,), generator=g)
        along = torch.stack((0.25 + 0.1 * (rand(n) - 0.5), 0.75 + 0.1 * (rand(n) - 0.5)), 1)  # (n, 2)
        along = torch.where(label[:, None].bool(), along, along.flip(1))  # label 1: red first (above / left)
        across = 0.25 + 0.5 * rand(n, 2)
        r = r.clamp(max=0.15)
        cy, cx = (along, across) if self.label == "above" else (across, along)
        return {"kind": kind, "cy": cy, "cx": cx, "r": r, "colour": colour[:, 1:], "bg": bg, "label": label}

    def render(
        self, scenes: dict[str, torch.Tensor], resolution: int, g: torch.Generator | None = None
    ) -> torch.Tensor:
        """(n, 3, res, res) images in [0, 1]: objects painted over the background, 2x supersampled."""
        n, k = scenes["kind"].shape
        big = 2 * resolution
        img = scenes["bg"][:, :, None, None].expand(n, 3, big, big).clone()  # (n, 3, 2res, 2res)
        for j in range(k):
            m = shape_masks(scenes["kind"][:, j], scenes["cy"][:, j], scenes["cx"][:, j], scenes["r"][:, j], big)
            img = img + m[:, None] * (scenes["colour"][:, j, :, None, None] - img)
        img = F.avg_pool2d(img, 2)  # (n, 3, res, res)
        if self.noise and g is not None:
            img = img + self.noise * torch.randn(img.shape, generator=g)
        return img.clamp(0, 1)

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        scenes = self.scenes(batch_size, generator)
        return self.render(scenes, size, generator), scenes["label"]

    def eval_set(
        self, size: int, max_items: int | None = None, split: EvalSplit = "val"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed scenes of ``split`` (``val_size`` each) rendered at ``size`` = res pixels:
        (n, 3, res, res) and (n,) labels."""
        n = min(self.val_size, max_items or self.val_size)
        scenes = {k: v[:n] for k, v in self._held_out[split].items()}
        noise = torch.Generator().manual_seed(self._seed(split, 2))
        return self.render(scenes, size, noise), scenes["label"]
