"""Kazemnejad et al.'s algorithmic tasks alike: generated from the seed at any length, the answer
at the end and only there, lengths too short for one instance refused in one line, and each task
bringing its own training recipe."""

import pytest
import torch
from typer.testing import CliRunner

from posenc.cli.app import app
from posenc.core.errors import ConfigError
from posenc.engine.config import compose, instantiate
from posenc.engine.evaluation import IGNORE_INDEX
from posenc.tasks.addition import AdditionTask
from posenc.tasks.algorithmic import prompt_then_answer
from posenc.tasks.parity import ParityTask
from posenc.tasks.sorting import SortingTask
from posenc.tasks.summation import SummationTask

TASKS = [AdditionTask(), SortingTask(), SummationTask(), ParityTask()]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_the_same_seed_gives_the_same_sequences_at_any_length(task):
    for length in (task.min_length, 37, 400):
        x, y = task.eval_set(length, 3)
        assert x.shape == y.shape == (3, length)
        assert 0 <= int(x.min()) and int(x.max()) < task.vocab_size
        x2, y2 = task.eval_set(length, 3)
        assert torch.equal(x, x2) and torch.equal(y, y2)
        b1, b2, b3 = (task.train_batch(8, length, torch.Generator().manual_seed(s)) for s in (5, 5, 6))
        assert torch.equal(b1[0], b2[0]) and torch.equal(b1[1], b2[1])
        assert not torch.equal(b1[0], b3[0])
        # the LM pairs score exactly the answer tokens, each as the target of the token before it
        tokens, answer = task.sample(8, length, torch.Generator().manual_seed(5))
        assert torch.equal(b1[0], tokens[:, :-1])
        assert torch.equal(b1[1] != IGNORE_INDEX, answer[:, 1:])
        assert torch.equal(b1[1][answer[:, 1:]], tokens[:, 1:][answer[:, 1:]])
    other = type(task)(seed=1)
    assert not torch.equal(other.eval_set(64, 8)[0], task.eval_set(64, 8)[0])


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_a_length_below_one_instance_is_refused_in_one_line(task):
    task.check_length(task.min_length)
    with pytest.raises(ConfigError) as e:
        task.check_length(task.min_length - 1, "val")
    assert str(e.value) == (
        f"sequence length {task.min_length - 1} is too short for task {task.name}; it needs >= {task.min_length}"
    )


def test_the_cli_refuses_a_short_length_before_any_work(tmp_path):
    result = CliRunner().invoke(app, ["train", "--task", "addition", "train.seq_len=4", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip() == "error: sequence length 4 is too short for task addition; it needs >= 5"
    assert not (tmp_path / "runs").exists()


def test_prompt_then_answer_pads_in_front_and_masks_the_answer_only():
    prompt, answer = torch.tensor([[1, 2, 9]]), torch.tensor([[3, 4]])
    tokens, mask = prompt_then_answer(prompt, answer, 6, pad=7)
    assert tokens.tolist() == [[7, 7, 1, 2, 9, 3, 4]]
    assert mask.tolist() == [[False] * 5 + [True] * 2]
    with pytest.raises(ValueError, match="exceed"):
        prompt_then_answer(prompt, answer, 3, pad=7)


@pytest.mark.parametrize("name", ["addition", "sorting", "summation", "parity"])
def test_each_task_brings_its_training_recipe(name):
    cfg = compose([f"task={name}", "seed=3"])
    task = instantiate(cfg.task, "task")
    assert task.name == name and task.seed == 3 and task.answer_only
    recipe = compose([f"train={name}"]).train
    assert cfg.train == recipe and cfg.train.seq_len != compose([]).train.seq_len
    task.check_length(cfg.train.seq_len)
    task.check_length(2 * cfg.train.seq_len)
    assert compose([f"task={name}", "train=default"]).train == compose([]).train  # the command line wins
