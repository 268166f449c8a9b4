"""Sorting: the answer of every generated sequence is its prompt in ascending order, repeats kept."""

import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.tasks.sorting import SortingTask


@pytest.mark.parametrize("length", [2, 3, 16, 33, 200])
def test_every_answer_is_the_prompt_sorted(length):
    task = SortingTask(n_symbols=5)
    n = length // 2
    tokens, answer = task.sample(64, length, torch.Generator().manual_seed(length))
    repeats = 0
    for seq, scored in zip(tokens.tolist(), answer.tolist()):
        sep = seq.index(task.sep)
        assert seq[:sep] == [task.pad] * (length % 2) + seq[length % 2 : sep]  # one PAD when length is odd
        prompt, sorted_ = seq[length % 2 : sep], seq[sep + 1 :]
        assert len(prompt) == len(sorted_) == n and all(0 <= s < 5 for s in prompt)
        assert sorted_ == sorted(prompt)
        assert scored == [False] * (sep + 1) + [True] * n
        repeats += len(set(prompt)) < n
    assert repeats > 0 or n < 2


def test_too_few_symbols_are_refused():
    with pytest.raises(ConfigError, match="task.n_symbols must be >= 2, got 1"):
        SortingTask(n_symbols=1)
