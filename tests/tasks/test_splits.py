"""Held-out splits: the test split the tables report shares nothing with the validation split
that stops training, nor with training; retrieval cells hold the same trials at every length."""

import pytest
import torch

from posenc.tasks.copy import CopyTask
from posenc.tasks.images import ShapesTask
from posenc.tasks.order import OrderTask
from posenc.tasks.passkey import PasskeyTask
from posenc.tasks.text import TextTask


def rows(x: torch.Tensor) -> set[tuple]:
    return {tuple(r.flatten().tolist()) for r in x}


def test_text_splits_partition_the_corpus_in_order():
    task = TextTask(max_bytes=20_000, val_fraction=0.1, test_fraction=0.2)
    train, val, test = (task.splits[k] for k in ("train", "val", "test"))
    assert (len(train), len(val), len(test)) == (14_000, 2_000, 4_000)
    assert torch.equal(torch.cat((train, val, test)), torch.frombuffer(bytearray(task_bytes(task)), dtype=torch.uint8))
    x, y = task.eval_set(100, split="test")
    assert len(x) == 39 and torch.equal(x[0], test[:100].long()) and torch.equal(y[-1], test[3801:3901].long())
    assert task.unigram_bits_per_byte() == pytest.approx(unigram(train, test))


def task_bytes(task: TextTask) -> bytes:
    from posenc.tasks.text import builtin_corpus

    return builtin_corpus("pydoc", 20_000)


def unigram(train: torch.Tensor, held_out: torch.Tensor) -> float:
    counts = torch.bincount(train.long(), minlength=256).double() + 1
    return float(-(counts / counts.sum()).log2()[held_out.long()].mean())


@pytest.mark.parametrize("bad", [dict(test_fraction=0.0), dict(test_fraction=0.5, val_fraction=0.5)])
def test_text_split_fractions_are_checked(bad):
    with pytest.raises(Exception, match="task.test_fraction must be in"):
        TextTask(max_bytes=5000, **bad)


@pytest.mark.parametrize(
    "task, size",
    [(CopyTask(seed=3), 24), (PasskeyTask(seed=1, eval_size=200), 40), (OrderTask(eval_size=256), 12)],
    ids=["copy", "passkey", "order"],
)
def test_generated_test_sets_share_no_sequence_with_validation_or_training(task, size):
    val, test = (task.eval_set(size, split=s)[0] for s in ("val", "test"))
    assert len(test) == len(val) and not rows(val) & rows(test)
    # a run trains on batches from a generator seeded with its seed (0..4 in the suites)
    trained = set().union(*(rows(task.train_batch(512, size, torch.Generator().manual_seed(s))[0]) for s in range(5)))
    assert not rows(test) & trained
    # fixed: the same split gives the same sequences every time
    assert torch.equal(task.eval_set(size, split="test")[0], test)


def test_shapes_test_scenes_are_not_the_validation_scenes():
    task = ShapesTask(resolution=16, val_size=64)
    (val, _), (test, test_y) = task.eval_set(16, split="val"), task.eval_set(16, split="test")
    assert val.shape == test.shape and not rows(val) & rows(test)
    assert 0 < int(test_y.bincount(minlength=4).min())  # every quadrant is in the test split


def test_passkey_retrieval_cells_hold_the_same_trials_at_every_length_and_depth():
    task = PasskeyTask(trials=64)
    for length in (32, 128, 512):
        x, y = task.retrieval_set(length)
        depths = task.retrieval_depths()
        assert x.shape == (64 * 5, length) and len(depths) == len(x)
        for d in task.depths:
            cell = x[depths == d]
            assert len(cell) == 64  # depth 1.0 too, at 512 as at 32
            starts = (cell == task.key).int().argmax(1)  # the KEY marker's index in each sequence
            expected = task.key_start(length, torch.full((64,), d))
            assert torch.equal(starts, expected)
        # the answer is the key's digits, scored at the last key_length targets
        keys = x[torch.arange(len(x))[:, None], (x == task.key).int().argmax(1)[:, None] + 1 + torch.arange(5)]
        assert torch.equal(y[:, -5:], keys) and bool((y[:, :-5] == -100).all())
    # a cell keeps its sequences when other depths are asked for
    only = PasskeyTask(trials=64, depths=[0.5]).retrieval_set(128)[0]
    assert torch.equal(only, task.retrieval_set(128)[0][task.retrieval_depths() == 0.5])
    assert task.chance() == {"accuracy": 0.1, "exact_match": pytest.approx(1e-5)}
    val_test = rows(task.retrieval_set(64, "val")[0]) & rows(task.retrieval_set(64, "test")[0])
    assert not val_test


def test_passkey_trials_must_be_positive():
    with pytest.raises(Exception, match="task.trials must be >= 1"):
        PasskeyTask(trials=0)
