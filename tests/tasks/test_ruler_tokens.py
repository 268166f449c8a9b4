"""RULER's retrieval tasks on tokens: the answer is the digits of the one needle whose key the
query names, at its depth of the filler; keys are distinct; the filler is one repeated sentence."""

import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.engine.config import compose, instantiate
from posenc.engine.evaluation import IGNORE_INDEX
from posenc.tasks.ruler.tokens import NeedleTokenTask


@pytest.mark.parametrize("keys", [1, 2, 4])
@pytest.mark.parametrize("length", [40, 97])
def test_the_answer_is_the_needle_of_the_key_asked_at_its_depth(keys, length):
    task = NeedleTokenTask(keys=keys, key_length=3, n_filler=5)
    depth = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0] * 4)
    tokens, mask = task.sample(20, length, torch.Generator().manual_seed(keys), depth=depth)
    assert tokens.shape == mask.shape == (20, length + 1)
    n_fill = length + 1 - (keys + 1) * task.block
    for row, d in zip(tokens.tolist(), depth.tolist()):
        assert row[-task.block] == task.query
        asked, answer = row[-task.block + 1], row[-3:]
        starts = [i for i, t in enumerate(row[: -task.block]) if t == task.key]
        assert len(starts) == keys
        needle_keys = [row[i + 1] for i in starts]
        assert len(set(needle_keys)) == keys and all(10 <= k < 10 + task.n_keys for k in needle_keys)
        (start,) = [i for i in starts if row[i + 1] == asked]
        assert row[start + 2 : start + task.block] == answer and all(0 <= a < 10 for a in answer)
        filler_before = start - task.block * sum(i < start for i in starts)
        assert filler_before == round(d * n_fill)
        inside = {j for i in starts for j in range(i, i + task.block)}
        filler = [t for j, t in enumerate(row[: -task.block]) if j not in inside]
        sentence = list(range(10 + task.n_keys, 10 + task.n_keys + 5))
        assert filler == (sentence * length)[:n_fill]  # the one sentence, repeated
    assert mask[:, -3:].all() and not mask[:, :-3].any()


def test_scored_as_passkey_by_length_and_depth():
    task = NeedleTokenTask(keys=2, key_length=3, trials=6, depths=(0.0, 1.0))
    x, y = task.retrieval_set(30)
    assert x.shape == y.shape == (12, 30) and task.retrieval_depths().tolist() == [0.0] * 6 + [1.0] * 6
    assert ((y != IGNORE_INDEX).sum(dim=1) == 3).all()
    again, _ = task.retrieval_set(30)
    assert torch.equal(x, again)
    assert task.chance() == {"accuracy": 0.1, "exact_match": pytest.approx(1e-3)}
    assert task.min_length == 14 and task.vocab_size == 12 + 16 + 8
    with pytest.raises(ConfigError, match="sequence length 13 is too short for task ruler_niah_multikey_2"):
        task.check_length(13)


def test_configs_and_bad_settings():
    single = instantiate(compose(["task=ruler_niah_single"]).task, "task")
    multi = instantiate(compose(["task=ruler_niah_multikey"]).task, "task")
    assert (single.name, single.keys, single.key_length) == ("ruler_niah_single", 1, 5)
    assert (multi.name, multi.keys, multi.key_length) == ("ruler_niah_multikey_2", 2, 3)
    with pytest.raises(ConfigError, match=r"task.keys must be in 1..task.n_keys .*got 5, 4"):
        NeedleTokenTask(keys=5, n_keys=4)
