"""Summation and parity (summation in base 2): the answer of every generated sequence is the sum
of its digits modulo the base, and guessing it scores the task's chance level."""

from functools import reduce
from operator import xor

import pytest
import torch

from posenc.tasks.parity import ParityTask
from posenc.tasks.summation import SummationTask


@pytest.mark.parametrize("length", [2, 9, 64, 300])
def test_every_answer_is_the_digit_sum_mod_10(length):
    task = SummationTask()
    tokens, answer = task.sample(64, length, torch.Generator().manual_seed(length))
    for seq, scored in zip(tokens.tolist(), answer.tolist()):
        digits, query, result = seq[: length - 1], seq[length - 1], seq[length]
        assert query == task.query == 10 and all(0 <= d <= 9 for d in digits)
        assert result == sum(digits) % 10
        assert scored == [False] * length + [True]


@pytest.mark.parametrize("length", [2, 6, 33, 300])
def test_every_parity_answer_is_one_exactly_when_the_ones_are_odd(length):
    task = ParityTask()
    tokens, answer = task.sample(64, length, torch.Generator().manual_seed(length))
    assert task.vocab_size == 3 and task.name == "parity"
    bits, query = tokens[:, : length - 1].tolist(), tokens[:, length - 1]
    assert (query == 2).all() and all(set(row) <= {0, 1} for row in bits)
    assert tokens[:, length].tolist() == [reduce(xor, row) for row in bits]
    assert torch.equal(answer, torch.arange(length + 1).expand(64, -1) == length)


@pytest.mark.parametrize("task", [SummationTask(), ParityTask()], ids=lambda t: t.name)
def test_the_answers_are_uniform_so_chance_is_one_over_the_base(task):
    tokens, _ = task.sample(20_000, 12, torch.Generator().manual_seed(0))
    share = torch.bincount(tokens[:, -1], minlength=task.base) / 20_000
    assert task.chance_accuracy == 1 / task.base and share.shape == (task.base,)
    assert (share - 1 / task.base).abs().max() < 0.01  # > 2.8 binomial standard deviations at n = 20,000
