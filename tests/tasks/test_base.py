"""Every task option's class fits one of the two task interfaces, with the one batch signature."""

import inspect

import pytest
import torch

from posenc.engine.config import list_options, option_class
from posenc.tasks.base import ImageTask, SequenceTask
from posenc.tasks.copy import CopyTask
from posenc.tasks.images import ShapesTask


@pytest.mark.parametrize("name", list(list_options("task")))
def test_task_classes_declare_their_interface(name):
    cls = option_class("task", name)
    interface = ImageTask if cls.kind == "image" else SequenceTask
    assert interface in cls.__mro__ and cls.kind in ("tokens", "image")
    assert list(inspect.signature(cls.train_batch).parameters) == ["self", "batch_size", "size", "generator"]
    for member in ("order_labels", "chance_accuracy", "describe"):
        assert hasattr(cls, member), (name, member)


def test_size_is_the_length_or_the_image_side():
    g = torch.Generator().manual_seed(0)
    x, y = CopyTask().train_batch(3, 10, g)
    assert x.shape == y.shape == (3, 10)
    images, labels = ShapesTask(resolution=16, val_size=2).train_batch(3, 24, g)
    assert images.shape == (3, 3, 24, 24) and labels.shape == (3,)


def test_the_defaults_a_task_inherits():
    """A generated task has no corpus baseline and no depths; the defaults say so, not a probe."""
    task = CopyTask()
    assert task.unigram_bits_per_byte() is None and task.window_depths(4) is None
    assert task.answer_only and not task.order_labels and task.chance_accuracy is None
    assert ShapesTask(val_size=2).model_kwargs() == {"num_classes": 4, "image_size": 32, "in_channels": 3}
