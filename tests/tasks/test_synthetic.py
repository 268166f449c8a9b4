"""Generated tasks: determinism from a seed, where the answers are, where the passkey hides."""

import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.engine.config import compose, instantiate
from posenc.engine.evaluation import IGNORE_INDEX
from posenc.tasks.assoc_recall import AssocRecallTask
from posenc.tasks.copy import CopyTask
from posenc.tasks.passkey import PasskeyTask

TASKS = [CopyTask(), CopyTask(reverse=True), AssocRecallTask(), PasskeyTask()]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_generated_from_the_seed_at_any_length(task):
    for length in (task.min_length, 37, 1000):
        x, y = task.eval_set(length, 3)
        assert x.shape == y.shape == (3, length)
        assert int(x.max()) < task.vocab_size and int(y.max()) < task.vocab_size
        x2, y2 = task.eval_set(length, 3)
        assert torch.equal(x, x2) and torch.equal(y, y2)
        b1 = task.train_batch(4, length, torch.Generator().manual_seed(5))
        b2 = task.train_batch(4, length, torch.Generator().manual_seed(5))
        b3 = task.train_batch(4, length, torch.Generator().manual_seed(6))
        assert all(torch.equal(a, b) for a, b in zip(b1, b2))
        assert not torch.equal(b1[0], b3[0])
    other = type(task)(seed=1, **({"reverse": task.reverse} if isinstance(task, CopyTask) else {}))
    assert not torch.equal(other.eval_set(64, 3)[0], task.eval_set(64, 3)[0])
    with pytest.raises(ConfigError, match=f"sequence length {task.min_length - 1} is too short for task {task.name}"):
        task.check_length(task.min_length - 1, "val")


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length", [10, 11])
def test_copy_answers_are_the_second_half(reverse, length):
    task = CopyTask(n_symbols=5, reverse=reverse)
    x, y = task.eval_set(length, 4)
    half = length // 2
    scored = y != IGNORE_INDEX
    assert scored[:, -half:].all() and not scored[:, :-half].any()
    full = torch.cat((x, y[:, -1:]), dim=1)  # (n, s+1): the whole sequence
    source, copy = full[:, -2 * half - 1 : -half - 1], full[:, -half:]
    assert (full[:, -half - 1] == task.sep).all()
    assert torch.equal(copy, source.flip(1) if reverse else source)
    assert torch.equal(y[:, -half:], copy)
    if length % 2:
        assert (x[:, 0] == task.pad).all()


@pytest.mark.parametrize("length", [40, 41])
def test_assoc_recall_scores_exactly_the_values_of_keys_seen_before(length):
    task = AssocRecallTask(n_keys=4, n_values=6)
    tokens, answer = task.sample(8, length, torch.Generator().manual_seed(0))
    x, y = task.eval_set(length, 8)
    assert tokens.shape == (8, length + 1)
    for row in range(8):
        seq, seen = tokens[row].tolist(), {}
        start = 1 if seq[0] == task.pad else 0
        assert start == (1 if length % 2 == 0 else 0)  # an odd number of tokens opens with PAD
        for i in range(start, len(seq), 2):
            key, value = seq[i], seq[i + 1]
            assert 0 <= key < 4 and 4 <= value < 10
            assert bool(answer[row, i + 1]) == (key in seen) and not answer[row, i]
            if key in seen:
                assert value == seen[key]
            seen[key] = value
    # the LM pairs score the answers only, and as targets of the token before them
    full_x, full_y = task.train_batch(8, length, torch.Generator().manual_seed(0))
    assert torch.equal(full_x, tokens[:, :-1])
    assert torch.equal(full_y[answer[:, 1:]], tokens[:, 1:][answer[:, 1:]])
    assert (full_y[~answer[:, 1:]] == IGNORE_INDEX).all()
    assert (y != IGNORE_INDEX).float().mean() > 0.3  # half the targets are values; with 4 keys most recall


@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 1.0])
def test_passkey_hides_the_key_at_its_depth_and_asks_for_it_at_the_end(depth):
    task = PasskeyTask(key_length=3, n_filler=4)
    length = 50
    x, y = task.eval_set(length, 5, depth=depth)
    n_fill = length + 1 - 2 * 4
    start = round(depth * n_fill)
    assert (x[:, start] == task.key).all()
    assert ((x == task.key).sum(1) == 1).all() and ((x == task.query).sum(1) == 1).all()
    assert (x[:, length - 3] == task.query).all()
    digits = x[:, start + 1 : start + 4]
    assert torch.equal(y[:, -3:], digits) and (y[:, :-3] == IGNORE_INDEX).all()
    filler = torch.ones_like(x, dtype=torch.bool)
    filler[:, start : start + 4] = False
    filler[:, length - 3 :] = False
    assert ((x[filler] >= 10) & (x[filler] < 14)).all()


def test_passkey_validation_cycles_through_the_depths():
    task = PasskeyTask(depths=[0.0, 1.0], key_length=2)
    x, _ = task.eval_set(30, 4)
    assert task.window_depths(4).tolist() == [0.0, 1.0, 0.0, 1.0]
    assert (x[0::2, 0] == task.key).all()  # depth 0: the key opens the sequence
    assert (x[1::2, 30 - 2 - 3] == task.key).all()  # depth 1: right before the question
    with pytest.raises(ConfigError, match="task.depths"):
        PasskeyTask(depths=[1.5])


@pytest.mark.parametrize("name", ["copy", "reverse", "assoc_recall", "passkey"])
def test_every_task_config_instantiates(name):
    task = instantiate(compose([f"task={name}", "seed=3"]).task, "task")
    assert task.seed == 3 and task.answer_only
