"""torchvision tasks on small files the tests write; missing files and offline downloads."""

import urllib.error
import urllib.request

import numpy as np
import pytest
import torch
from PIL import Image

from posenc.core.errors import ConfigError, UserError
from posenc.tasks.vision import TorchvisionTask


def write_folder(root, classes=("cat", "dog"), per_class=5, size=(20, 12)):
    for i, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for j in range(per_class):
            arr = np.full((size[1], size[0], 3), 40 * i + j, dtype=np.uint8)
            Image.fromarray(arr).save(root / name / f"{j}.png")


def test_image_folder_loads_resizes_and_splits(image_roots):
    task = TorchvisionTask(
        "image_folder", root=str(image_roots["image_folder"]), resolution=8, val_fraction=0.2, test_fraction=0.2
    )
    assert task.num_classes == 2 and task.classes == ["cat", "dog"] and task.in_channels == 3
    # 10 images: 2 held out as the test split, 1 of the other 8 to validate
    assert len(task.train_labels) == 7 and len(task.val_labels) == 1 and len(task.test_labels) == 2
    x, y = task.eval_set(task.input_size(128), split="test")
    assert x.shape == (2, 3, 8, 8)
    # every image is one flat colour: the pixel value tells class and index back
    for img, label in zip(x, y):
        value = round(float(img[0, 0, 0]) * 255)
        assert value // 40 == int(label)
    xb, yb = task.train_batch(6, 16, torch.Generator().manual_seed(0))
    assert xb.shape == (6, 3, 16, 16) and yb.shape == (6,)


def test_image_folder_train_and_val_folders(tmp_path):
    write_folder(tmp_path / "train", per_class=3)
    write_folder(tmp_path / "val", per_class=2)
    task = TorchvisionTask("image_folder", root=str(tmp_path), resolution=4, val_fraction=0.34)
    # val/ is the test split; validation is 2 of the 6 training images
    assert len(task.train_labels) == 4 and len(task.val_labels) == 2 and task.test_labels.tolist() == [0, 0, 1, 1]


def test_image_folder_missing_or_empty(tmp_path):
    with pytest.raises(ConfigError, match="task.root '.*nowhere' does not exist"):
        TorchvisionTask("image_folder", root=str(tmp_path / "nowhere"))
    (tmp_path / "empty" / "cat").mkdir(parents=True)
    with pytest.raises(ConfigError, match="holds no images in class folders"):
        TorchvisionTask("image_folder", root=str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="task.root is required"):
        TorchvisionTask("mnist")


def test_mnist_from_idx_files(image_roots):
    task = TorchvisionTask("mnist", root=str(image_roots["mnist"]), resolution=16)
    # 12 training images: 1 held out to validate; the 4 test images are the test split
    assert task.in_channels == 1 and task.num_classes == 10 and len(task.train_labels) == 11
    assert len(task.val_labels) == 1
    x, y = task.eval_set(16, split="test")
    assert x.shape == (4, 1, 16, 16) and y.tolist() == [0, 1, 2, 3]


def test_cifar10_from_pickles(image_roots):
    task = TorchvisionTask("cifar10", root=str(image_roots["cifar10"]), resolution=32, val_size=2)
    assert task.train_images.shape == (14, 3, 32, 32) and task.train_images.dtype == torch.uint8
    x, y = task.eval_set(32, split="test")
    assert x.shape == (2, 3, 32, 32) and y.tolist() == [1, 2]


@pytest.mark.parametrize("dataset", ["cifar10", "mnist"])
def test_missing_files_and_offline_download_say_how_to_place_them(tmp_path, monkeypatch, dataset):
    with pytest.raises(UserError, match=f"holds no {dataset} files; download .* or set task.download=true"):
        TorchvisionTask(dataset, root=str(tmp_path))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(UserError) as e:
        TorchvisionTask(dataset, root=str(tmp_path), download=True)
    message = str(e.value)
    assert message.startswith(f"could not download {dataset} into '{tmp_path}'")
    assert "without a network" in message and str(tmp_path) in message and "\n" not in message
