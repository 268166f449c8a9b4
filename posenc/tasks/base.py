"""What every task shares with the engine that scores it: one task interface, two protocols.

A task is a sequence task (the causal LM's: text, copy, passkey, order) or an image task (the
ViT's: shapes, CIFAR-10, MNIST, a folder). Both protocols (``typing.Protocol``) declare the same
members, so the engine and the experiments call a task without asking which it is:

* ``input_kind``: what the model reads of it, ``"tokens"`` or ``"patches"``; a model class
  states the same fact (``takes_patches``) and ``posenc.engine.build`` compares the two;
* ``input_size(seq_len)``: the ``size`` of a training batch (the sequence length, or the image
  side in pixels); ``train_batch(batch_size, size, generator)`` is the one batch signature;
* ``eval_set(size, max_items, split)``: the fixed evaluation set at ``size`` of one split:
  ``"val"`` is what training validates on (and stops on), ``"test"`` what the tables report;
  no training batch and no validation item is drawn from the test split;
* ``model_inputs()``: what the model needs to know of the data;
* ``train_columns(size, scores, elements_per_s)``: the train table's task-specific columns.

A task class may subclass its protocol to inherit the defaults (no answer mask, no order labels,
no chance level, no baseline); one that defines every member itself fits without subclassing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Protocol

import torch

IGNORE_INDEX = -100  # a target the loss and the accuracy skip (prompt tokens, padding)

# What a task is judged by when training stops at its target: answer accuracy, or bits per byte (text)
Criterion = Literal["accuracy", "bpb"]
# What a model reads of a task's inputs: token ids (the causal LM) or image patches (the ViT)
InputKind = Literal["tokens", "patches"]
# The held-out splits: "val" is scored during training and stops it (train to criterion), "test"
# is scored once for the tables; neither is ever trained on
EvalSplit = Literal["val", "test"]
SPLITS: tuple[EvalSplit, ...] = ("val", "test")


def stream_seed(*key: object) -> int:
    """A 63-bit generator seed from a key (task, seed, split, length, …): held-out streams of
    their own, far from the small seeds training generators start from."""
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest()) >> 1


class SequenceTask(Protocol):
    """Token sequences for the causal LM: (b, s) inputs and (b, s) next-token targets, with
    ``IGNORE_INDEX`` where nothing is scored."""

    input_kind: ClassVar[InputKind] = "tokens"
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

    def input_size(self, seq_len: int) -> int:
        """A training batch holds sequences of ``train.seq_len`` tokens."""
        return seq_len

    def check_length(self, seq_len: int, split: str = "train") -> None:
        """Raise ``ConfigError`` when ``split`` cannot give windows of ``seq_len`` tokens."""
        ...

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(b, s) inputs and (b, s) targets of ``size`` = s tokens, drawn from ``generator``."""
        ...

    def eval_set(
        self, size: int, max_items: int | None = None, split: EvalSplit = "val"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed windows of ``split`` at ``size`` = s tokens (at most ``max_items``): (n, s) inputs and targets."""
        ...

    def model_inputs(self) -> dict[str, int]:
        """What the model needs to know of the data: its vocabulary."""
        return {"vocab_size": self.vocab_size}

    def window_depths(self, n: int) -> torch.Tensor | None:
        """(n,) depth of the key in each of ``n`` validation windows (passkey), or None."""
        return None

    def retrieval_set(self, size: int, split: EvalSplit = "test") -> tuple[torch.Tensor, torch.Tensor] | None:
        """A retrieval task's scored set: the same number of sequences at every depth and length
        (``retrieval_depths`` gives each row's depth); None for a task without depths."""
        return None

    def retrieval_depths(self) -> torch.Tensor | None:
        return None

    def chance(self) -> dict[str, float]:
        """Each metric's score by guessing, where the task knows it (``accuracy``, ``exact_match``)."""
        return (
            {}
            if self.chance_accuracy is None
            else {"accuracy": self.chance_accuracy, "exact_match": self.chance_accuracy}
        )

    def unigram_bits_per_byte(self) -> float | None:
        """The unigram baseline of a corpus in bits per byte, or None (a generated task)."""
        return None

    def train_columns(
        self, size: int, scores: Mapping[EvalSplit, Mapping[str, Any]], elements_per_s: float
    ) -> dict[str, Any]:
        """The train table's columns for this task: the length, each split's scores (``val_…``,
        ``test_…``: nats, bits, perplexity, accuracy, and for a generated task the exact match of
        whole answers, with the number of items scored), the unigram baseline of a corpus, and
        tokens per second."""
        columns: dict[str, Any] = {"seq_len": size}
        for split, s in scores.items():
            columns |= {
                f"{split}_loss": s["loss"],
                f"{split}_bpb": s["bits"],
                f"{split}_ppl": s["ppl"],
                f"{split}_accuracy": s["accuracy"],
                **({f"{split}_exact_match": s["exact_match"]} if self.answer_only else {}),
                f"{split}_items": s["items"],
            }
        unigram = self.unigram_bits_per_byte()
        return {
            **columns,
            **({"unigram_bpb": unigram} if unigram is not None else {}),  # a generated task has none
            "tokens_per_s": elements_per_s,
        }

    def describe(self) -> dict[str, Any]:
        return {"task": self.name}


class ImageTask(Protocol):
    """Labelled images for the ViT: (b, C, res, res) in [0, 1] and (b,) class labels."""

    input_kind: ClassVar[InputKind] = "patches"
    name: str
    num_classes: int
    in_channels: int
    resolution: int  # the training resolution in pixels
    order_labels: bool = False
    chance_accuracy: ClassVar[float | None] = None
    criterion: ClassVar[Criterion] = "accuracy"  # training stops at train.target_accuracy

    def input_size(self, seq_len: int) -> int:
        """A training batch holds images at the task's resolution, whatever ``train.seq_len`` says."""
        return self.resolution

    def check_length(self, size: int, split: str = "train") -> None:
        """Images are resized to any side; the model checks that its patches tile it."""
        return None

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(b, C, res, res) images at ``size`` = res pixels and their (b,) labels."""
        ...

    def eval_set(
        self, size: int, max_items: int | None = None, split: EvalSplit = "val"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed images of ``split`` at ``size`` = res pixels (at most ``max_items``):
        (n, C, res, res) images and (n,) labels."""
        ...

    def model_inputs(self) -> dict[str, int]:
        """What the model needs to know of the data: classes, image size, channels."""
        return {"num_classes": self.num_classes, "image_size": self.resolution, "in_channels": self.in_channels}

    def train_columns(
        self, size: int, scores: Mapping[EvalSplit, Mapping[str, Any]], elements_per_s: float
    ) -> dict[str, Any]:
        """The train table's columns for this task: the resolution, each split's loss, accuracy
        and number of images against chance, and images per second (the loop counts C·H·W
        elements an image)."""
        columns = {
            f"{split}_{k}": s[v]
            for split, s in scores.items()
            for k, v in (("loss", "loss"), ("accuracy", "accuracy"), ("items", "items"))
        }
        return {
            "resolution": size,
            **columns,
            "chance": 1 / self.num_classes,
            "images_per_s": elements_per_s / (self.in_channels * size * size),
        }

    def describe(self) -> dict[str, Any]:
        return {"task": self.name, "classes": self.num_classes, "chance": 1 / self.num_classes}


Task = SequenceTask | ImageTask
