import pytest
import torch
from torch import nn

from posenc.core.errors import ConfigError
from posenc.engine.evaluation import IGNORE_INDEX, evaluate
from posenc.tasks.order import OrderTask


def actors_of(task: OrderTask, x: torch.Tensor) -> torch.Tensor:
    """(n, 2) positions of the two actors in each row."""
    is_actor = (x >= task.n_fillers) & (x < task.query)
    return is_actor.nonzero()[:, 1].view(len(x), 2)


def test_sequences_hold_two_actors_a_query_and_one_scored_answer():
    task = OrderTask(n_fillers=5, n_actors=4)
    x, y = task.train_batch(256, 10, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (256, 10) and task.vocab_size == 10
    assert (x[:, -1] == task.query).all() and (x[:, :-1] != task.query).all()
    pos = actors_of(task, x)  # exactly two actors per row, distinct tokens
    first, second = x.gather(1, pos).unbind(1)
    assert (first != second).all()
    assert (y[:, :-1] == IGNORE_INDEX).all()
    torch.testing.assert_close(y[:, -1], first)  # the answer is the actor that comes first


def test_swapping_the_actors_keeps_the_multiset_and_flips_the_label():
    # 人咬狗 / 狗咬人: same tokens, the other order, the other answer
    task = OrderTask()
    x, y = task.eval_set(12, 64)
    pos = actors_of(task, x)
    swapped = x.clone()
    rows = torch.arange(len(x))
    swapped[rows, pos[:, 0]], swapped[rows, pos[:, 1]] = x[rows, pos[:, 1]], x[rows, pos[:, 0]]
    assert torch.equal(swapped.sort(-1).values, x.sort(-1).values)
    assert (x[rows, pos[:, 1]] != y[:, -1]).all()  # the new first actor is the old second


def test_both_orders_are_equally_likely_so_an_order_blind_model_is_at_one_half():
    task = OrderTask(n_actors=3)
    x, y = task.train_batch(20000, 6, torch.Generator().manual_seed(1))
    pair = x.gather(1, actors_of(task, x))
    smaller_first = (y[:, -1] == pair.min(1).values).double().mean().item()
    assert abs(smaller_first - 0.5) < 0.015 and task.chance_accuracy == 0.5


def test_eval_set_is_fixed_and_capped():
    task = OrderTask(eval_size=40)
    a, b = task.eval_set(8), task.eval_set(8)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and len(a[0]) == 40
    assert len(task.eval_set(8, max_items=7)[0]) == 7


class FirstActorOracle(nn.Module):
    """Reads the order, as a perfect model would: logits peak at the first actor everywhere."""

    def __init__(self, task: OrderTask) -> None:
        super().__init__()
        self.task = task

    def forward(self, x):
        first = x.gather(1, actors_of(self.task, x)[:, :1])  # (b, 1)
        return nn.functional.one_hot(first.expand_as(x), self.task.vocab_size).float() * 10


def test_evaluate_scores_only_the_answer():
    task = OrderTask()
    x, y = task.eval_set(9)
    scores = evaluate(FirstActorOracle(task), x, y)
    assert scores["accuracy"] == 1.0  # the other 8 positions (fillers) would be wrong if scored


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="length >= 3"):
        OrderTask().check_length(2)
    with pytest.raises(ConfigError, match="n_actors"):
        OrderTask(n_actors=1)
