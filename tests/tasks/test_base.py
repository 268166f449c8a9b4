"""Every task option's class fits the one task interface: the same members on sequence and image
tasks, the one batch signature, and a declared fact of what it gives the model."""

import inspect

import pytest
import torch

from posenc.engine.config import list_options, option_class
from posenc.tasks.base import ImageTask, SequenceTask
from posenc.tasks.copy import CopyTask
from posenc.tasks.images import ShapesTask
from posenc.tasks.text import TextTask

INTERFACE = ("input_kind", "input_size", "eval_set", "model_inputs", "train_columns", "check_length", "describe")


# the tasks posenc's models train on (a RULER prompt task, trains = False, is text for a real model)
TRAINED = [name for name in list_options("task") if getattr(option_class("task", name), "trains", True)]


@pytest.mark.parametrize("name", TRAINED)
def test_task_classes_declare_their_interface(name):
    cls = option_class("task", name)
    interface = {"tokens": SequenceTask, "patches": ImageTask}[cls.input_kind]
    assert interface in cls.__mro__
    assert list(inspect.signature(cls.train_batch).parameters) == ["self", "batch_size", "size", "generator"]
    assert list(inspect.signature(cls.eval_set).parameters)[:3] == ["self", "size", "max_items"]
    for member in (*INTERFACE, "order_labels", "chance_accuracy", "criterion"):
        assert hasattr(cls, member), (name, member)
    assert not hasattr(cls, "kind") and not hasattr(cls, "eval_windows") and not hasattr(cls, "model_kwargs")


def test_both_protocols_declare_the_same_members():
    def members(protocol):
        return {m for m in vars(protocol) if not m.startswith("_")} | set(protocol.__annotations__)

    assert set(INTERFACE) <= members(SequenceTask) & members(ImageTask)


def test_size_is_the_length_or_the_image_side():
    g = torch.Generator().manual_seed(0)
    copy, shapes = CopyTask(), ShapesTask(resolution=16, val_size=2)
    assert copy.input_size(10) == 10 and shapes.input_size(10) == 16  # an image task ignores train.seq_len
    x, y = copy.train_batch(3, 10, g)
    assert x.shape == y.shape == (3, 10)
    images, labels = shapes.train_batch(3, 24, g)
    assert images.shape == (3, 3, 24, 24) and labels.shape == (3,)
    x, y = copy.eval_set(12, max_items=5)
    assert x.shape == y.shape == (5, 12)
    images, labels = shapes.eval_set(24, max_items=5)
    assert images.shape == (2, 3, 24, 24) and labels.shape == (2,)  # val_size=2 caps it


def test_the_defaults_a_task_inherits():
    """A generated task has no corpus baseline and no depths; the defaults say so, not a probe."""
    task = CopyTask()
    assert task.unigram_bits_per_byte() is None and task.window_depths(4) is None
    assert task.answer_only and not task.order_labels and task.chance_accuracy is None
    assert task.model_inputs() == {"vocab_size": 18}
    assert ShapesTask(val_size=2).model_inputs() == {"num_classes": 4, "image_size": 32, "in_channels": 3}
    assert ShapesTask(val_size=2).check_length(10_000) is None  # images resize to any side


def test_train_columns_are_the_tasks_own():
    val = {"loss": 0.6931471805599453, "bits": 1.0, "ppl": 2.0, "accuracy": 0.25, "exact_match": 0.125, "items": 8}
    test = {**val, "accuracy": 0.5, "items": 16}
    assert CopyTask().train_columns(64, {"val": val, "test": test}, 1000.0) == {
        "seq_len": 64,
        "val_loss": 0.6931471805599453,
        "val_bpb": 1.0,
        "val_ppl": 2.0,
        "val_accuracy": 0.25,
        "val_exact_match": 0.125,
        "val_items": 8,
        "test_loss": 0.6931471805599453,
        "test_bpb": 1.0,
        "test_ppl": 2.0,
        "test_accuracy": 0.5,
        "test_exact_match": 0.125,
        "test_items": 16,
        "tokens_per_s": 1000.0,
    }
    text = TextTask(max_bytes=5000)
    columns = text.train_columns(64, {"test": test}, 1000.0)
    assert columns["unigram_bpb"] == pytest.approx(text.unigram_bits_per_byte()) and "test_exact_match" not in columns
    # 3 x 16 x 16 = 768 input elements an image
    assert ShapesTask(resolution=16, val_size=2).train_columns(16, {"test": test}, 7680.0) == {
        "resolution": 16,
        "test_loss": 0.6931471805599453,
        "test_accuracy": 0.5,
        "test_items": 16,
        "chance": 0.25,
        "images_per_s": 10.0,
    }
