"""Image classification on torchvision datasets: CIFAR-10, MNIST and any ImageFolder.

posenc never downloads at run time unless asked: ``task.download=true`` lets torchvision fetch
CIFAR-10 or MNIST into ``task.root``; without a network that fails with one line that says how
to place the files by hand. Images are kept as uint8 at their stored size and resized
(bilinear, antialiased) to whatever resolution a batch asks for, so one dataset serves
training at ``task.resolution`` and evaluation at any other.

Splits: the dataset's own test set (a folder's ``test/`` or ``val/``) is the test split the
tables report; the validation split that stops training is a fixed ``val_fraction`` of the
training images, never trained on. A folder with no split of its own gives up
``test_fraction`` and ``val_fraction`` of its images.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F

from posenc.core.errors import ConfigError, UserError
from posenc.tasks.base import EvalSplit, ImageTask

Dataset = Literal["cifar10", "mnist", "image_folder"]
BY_HAND = {
    "cifar10": "download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz on a machine with a network "
    "and extract it so that {root}/cifar-10-batches-py/ exists",
    "mnist": "download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and "
    "t10k-labels-idx1-ubyte.gz from https://ossci-datasets.s3.amazonaws.com/mnist/ on a machine with a "
    "network and gunzip them into {root}/MNIST/raw/",
}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".ppm", ".tif", ".tiff")


def resize(images: torch.Tensor | list[torch.Tensor], resolution: int) -> torch.Tensor:
    """uint8 (n, C, H, W) images (or a list of (C, H, W)) -> float (n, C, res, res) in [0, 1]."""
    if isinstance(images, list):
        return torch.cat([resize(img[None], resolution) for img in images]) if images else torch.zeros(0)
    x = images.float() / 255  # (n, C, H, W)
    if x.shape[-2:] != (resolution, resolution):
        x = F.interpolate(x, size=(resolution, resolution), mode="bilinear", antialias=True, align_corners=False)
    return x.clamp(0, 1)


def _torchvision_split(dataset: str, root: Path, train: bool, download: bool) -> tuple[torch.Tensor, torch.Tensor]:
    from torchvision import datasets

    cls = datasets.CIFAR10 if dataset == "cifar10" else datasets.MNIST
    try:
        ds = cls(str(root), train=train, download=download)
    except Exception as e:  # URLError, RuntimeError, OSError: all mean the files are not there
        how = BY_HAND[dataset].format(root=root)
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if download:
            raise UserError(
                f"could not download {dataset} into '{root}' ({reason}); without a network, {how}, "
                "then run with task.download=false"
            ) from None
        raise UserError(f"task.root '{root}' holds no {dataset} files; {how}, or set task.download=true") from None
    data = torch.as_tensor(ds.data)
    images = data.permute(0, 3, 1, 2) if data.dim() == 4 else data[:, None]  # (n, C, H, W) uint8
    return images.contiguous(), torch.as_tensor(ds.targets, dtype=torch.long)


def _image_folder(root: Path) -> tuple[list[torch.Tensor], torch.Tensor, list[str]]:
    import numpy as np
    from PIL import Image

    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    images, labels = [], []
    for i, name in enumerate(classes):
        for f in sorted((root / name).rglob("*")):
            if f.suffix.lower() in IMAGE_SUFFIXES:
                with Image.open(f) as img:
                    images.append(torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1).contiguous())
                labels.append(i)
    return images, torch.tensor(labels, dtype=torch.long), classes


Images = torch.Tensor | list[torch.Tensor]  # uint8 (n, C, H, W), or a list of (C, H, W) of any sizes


def carve(images: Images, labels: torch.Tensor, fraction: float) -> tuple[Images, torch.Tensor, Images, torch.Tensor]:
    """(kept images, labels, held-out images, labels): a fixed ``fraction`` (at least one image)
    held out by a permutation seeded 0."""
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    n = max(1, int(len(labels) * fraction)) if len(labels) > 1 else 0
    out, kept = order[:n], order[n:]

    def take(idx: torch.Tensor) -> Images:
        return [images[i] for i in idx.tolist()] if isinstance(images, list) else images[idx]

    return take(kept), labels[kept], take(out), labels[out]


class TorchvisionTask(ImageTask):
    """Train, validation and test images of a torchvision dataset or a folder, resized on demand."""

    def __init__(
        self,
        dataset: Dataset,
        root: str | None = None,
        download: bool = False,
        resolution: int = 32,
        val_size: int | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
    ) -> None:
        if dataset not in ("cifar10", "mnist", "image_folder"):
            raise ConfigError(f"task.dataset '{dataset}' is unknown; valid: cifar10, mnist, image_folder")
        if root is None:
            raise ConfigError(f"task.root is required for {dataset}: the folder that holds (or will hold) its files")
        if resolution < 4:
            raise ConfigError(f"task.resolution must be >= 4 px, got {resolution}")
        if not 0.0 < val_fraction < 1.0:
            raise ConfigError(f"task.val_fraction must be in (0, 1), got {val_fraction}")
        if not 0.0 < test_fraction < 1.0:
            raise ConfigError(f"task.test_fraction must be in (0, 1), got {test_fraction}")
        path = Path(root).expanduser()
        self.name, self.resolution = dataset, resolution
        if dataset == "image_folder":
            if download:
                raise ConfigError("task.download does not apply to image_folder; point task.root at your folder")
            train, train_y, self.test_images, self.test_labels = self._load_folder(path, test_fraction)
        else:
            if path.exists() and not path.is_dir():
                raise ConfigError(f"task.root '{root}' is a file; give a folder")
            train, train_y = _torchvision_split(dataset, path, True, download)
            self.test_images, self.test_labels = _torchvision_split(dataset, path, False, False)
            self.classes = list(range(int(train_y.max()) + 1))
        if len(train_y) < 2:
            raise ConfigError(
                f"task.root '{root}': {len(train_y)} training image(s) cannot give a validation split too"
            )
        self.train_images, self.train_labels, self.val_images, self.val_labels = carve(train, train_y, val_fraction)
        if val_size is not None:  # caps both held-out splits
            self.val_images, self.val_labels = self.val_images[:val_size], self.val_labels[:val_size]
            self.test_images, self.test_labels = self.test_images[:val_size], self.test_labels[:val_size]
        self.num_classes = len(self.classes)
        self.in_channels = self.train_images[0].shape[0]

    def _load_folder(self, root: Path, test_fraction: float) -> tuple[Images, torch.Tensor, Images, torch.Tensor]:
        """Training and test images of ``root/<class>/*.png`` (``test_fraction`` of them held out),
        or of ``root/train`` and ``root/test`` (or ``val``) if both exist."""
        if not root.is_dir():
            raise ConfigError(f"task.root '{root}' does not exist or is not a folder; expected ROOT/<class>/<image>")
        val_dir = next((root / v for v in ("test", "val") if (root / v).is_dir()), None)
        if (root / "train").is_dir() and val_dir is not None:
            train, train_y, classes = _image_folder(root / "train")
            val, val_y, val_classes = _image_folder(val_dir)
            if val_classes != classes:
                raise ConfigError(
                    f"task.root '{root}': {val_dir.name}/ has classes {val_classes}, train/ has {classes}"
                )
        else:
            images, labels, classes = _image_folder(root)
            train, train_y, val, val_y = carve(images, labels, test_fraction) if images else ([], labels, [], labels)
        if not train or not val:
            raise ConfigError(
                f"task.root '{root}' holds no images in class folders (or too few to split); "
                "expected ROOT/<class>/<image>.png"
            )
        self.classes = classes
        return train, train_y, val, val_y

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, len(self.train_labels), (batch_size,), generator=generator)
        images = [self.train_images[i] for i in idx] if isinstance(self.train_images, list) else self.train_images[idx]
        return resize(images, size), self.train_labels[idx]

    def eval_set(
        self, size: int, max_items: int | None = None, split: EvalSplit = "val"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The images of ``split`` resized to ``size`` = res pixels: (n, C, res, res) and (n,) labels."""
        images, labels = (self.val_images, self.val_labels) if split == "val" else (self.test_images, self.test_labels)
        n = len(labels) if max_items is None else min(max_items, len(labels))
        return resize(images[:n], size), labels[:n]
