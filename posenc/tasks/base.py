"""What every task shares with the engine that scores it: the two task interfaces.

A task is a sequence task (the causal LM's: text, copy, passkey, order) or an image task (the
ViT's: shapes, CIFAR-10, MNIST, a folder). Each interface is a ``typing.Protocol``: the engine
and the experiments use only what it declares, never probe a task for other attributes. A task
class may subclass its protocol to inherit the defaults (no answer mask, no order labels, no
chance level, no baseline); one that defines every member itself fits without subclassing.

``train_batch(batch_size, size, generator)`` is the one batch signature: ``size`` is the
sequence length of a sequence task and the image side in pixels of an image task.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Protocol

import torch

IGNORE_INDEX = -100  # a target the loss and the accuracy skip (prompt tokens, padding)

# What a task is judged by when training stops at its target: answer accuracy, or bits per byte (text)
Criterion = Literal["accuracy", "bpb"]


class SequenceTask(Protocol):
    """Token sequences for the causal LM: (b, s) inputs and (b, s) next-token targets, with
    ``IGNORE_INDEX`` where nothing is scored."""

    kind: ClassVar[str] = "tokens"
    name: str
    vocab_size: int
    # accuracy on answers is the task's score, not bits per byte (generated tasks)
    answer_only: ClassVar[bool] = False
    # the label depends only on the order of the tokens (``posenc order`` trains on such tasks);
    # a class may make it a property of its settings
    order_labels: bool = False
    # the accuracy of a model blind to order, when the task knows it (None: measured)
    chance_accuracy: ClassVar[float | None] = None
    # what training to criterion reads: answer accuracy (train.target_accuracy), or bits per
    # byte (train.target_bpb) for text
    criterion: ClassVar[Criterion] = "accuracy"

    def check_length(self, seq_len: int, split: str = "train") -> None:
        """Raise ``ConfigError`` when ``split`` cannot give windows of ``seq_len`` tokens."""
        ...

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(b, s) inputs and (b, s) targets of ``size`` = s tokens, drawn from ``generator``."""
        ...

    def eval_windows(self, seq_len: int, max_windows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed validation set at ``seq_len``: (n, s) inputs and targets."""
        ...

    def window_depths(self, n: int) -> torch.Tensor | None:
        """(n,) depth of the key in each of ``n`` validation windows (passkey), or None."""
        return None

    def unigram_bits_per_byte(self) -> float | None:
        """The unigram baseline of a corpus in bits per byte, or None (a generated task)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"task": self.name}


class ImageTask(Protocol):
    """Labelled images for the ViT: (b, C, res, res) in [0, 1] and (b,) class labels."""

    kind: ClassVar[str] = "image"
    name: str
    num_classes: int
    in_channels: int
    resolution: int  # the training resolution in pixels
    order_labels: bool = False
    chance_accuracy: ClassVar[float | None] = None
    criterion: ClassVar[Criterion] = "accuracy"  # training stops at train.target_accuracy

    def model_kwargs(self) -> dict[str, int]:
        """What the model needs to know of the data: classes, image size, channels."""
        return {"num_classes": self.num_classes, "image_size": self.resolution, "in_channels": self.in_channels}

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(b, C, res, res) images at ``size`` = res pixels and their (b,) labels."""
        ...

    def eval_set(
        self, resolution: int | None = None, max_items: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed validation images at ``resolution`` (default: the training one) and labels."""
        ...

    def describe(self) -> dict[str, Any]:
        return {"task": self.name, "classes": self.num_classes, "chance": 1 / self.num_classes}


Task = SequenceTask | ImageTask
