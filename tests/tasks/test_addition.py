"""Addition: the answer of every generated sequence is the sum of the two operands it shows."""

import pytest
import torch

from posenc.tasks.addition import AdditionTask, add_digits


def number(digits: list[int]) -> int:
    return int("".join(map(str, digits)))


def test_add_digits_carries_most_significant_first():
    a, b = torch.tensor([[9, 9, 5], [0, 0, 1]]), torch.tensor([[0, 0, 7], [0, 0, 2]])
    assert add_digits(a, b).tolist() == [[1, 0, 0, 2], [0, 0, 0, 3]]  # 995 + 7, 1 + 2


@pytest.mark.parametrize("length", [5, 14, 16, 17, 301])
def test_every_answer_is_the_sum_of_the_operands_in_the_prompt(length):
    task = AdditionTask()
    k = (length - 2) // 3
    tokens, answer = task.sample(64, length, torch.Generator().manual_seed(length))
    assert tokens.shape == answer.shape == (64, length + 1)
    carried = 0
    for seq, scored in zip(tokens.tolist(), answer.tolist()):
        pads = seq.index(next(t for t in seq if t != task.pad))
        assert pads == length + 1 - (3 * k + 3) and pads <= 2  # left padding only, at most two
        body = seq[pads:]
        plus, equals = body.index(task.plus), body.index(task.equals)
        a, b, c = body[:plus], body[plus + 1 : equals], body[equals + 1 :]
        assert len(a) == len(b) == k and len(c) == k + 1
        assert all(0 <= d <= 9 for d in a + b + c)
        assert number(c) == number(a) + number(b)  # Python integers: no overflow at 99 digits
        assert scored == [False] * (pads + equals + 1) + [True] * (k + 1)  # the mask is the sum's digits
        carried += c[0]
    assert 0 < carried < 64  # some sums carry into the leading digit, some do not
