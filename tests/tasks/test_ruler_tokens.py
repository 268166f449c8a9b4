"""RULER's retrieval tasks on tokens: the answer is the digits of the needles whose keys the
query names (every value of each, in the order they occur), the first at its depth of the
filler; keys are distinct; the filler is one repeated sentence."""

import pandas as pd
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


@pytest.mark.parametrize("keys,values,queries", [(1, 3, 1), (3, 1, 2), (2, 2, 2), (4, 2, 1)])
@pytest.mark.parametrize("length", [60, 131])
def test_multi_value_and_multi_query_answers_are_parsed_from_the_context(keys, values, queries, length):
    task = NeedleTokenTask(keys=keys, values=values, queries=queries, key_length=2, n_filler=5)
    depth = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0] * 4)
    tokens, mask = task.sample(20, length, torch.Generator().manual_seed(7), depth=depth)
    tail = queries * task.asked
    n_fill = length + 1 - keys * values * task.block - tail
    for row, d, m in zip(tokens.tolist(), depth.tolist(), mask.tolist()):
        body = row[:-tail]
        starts = [i for i, t in enumerate(body) if t == task.key]
        assert len(starts) == keys * values
        needle_keys = [body[i + 1] for i in starts]
        assert len(set(needle_keys)) == keys and all(needle_keys.count(k) == values for k in needle_keys)
        answer = []
        for j in range(queries):  # QUERY key, then the digits of each of its values in context order
            block = row[len(body) + j * task.asked : len(body) + (j + 1) * task.asked]
            assert block[0] == task.query
            values_in_order = [body[i + 2 : i + task.block] for i in starts if body[i + 1] == block[1]]
            assert block[2:] == [t for v in values_in_order for t in v]
            answer += block[2:]
        assert len({row[len(body) + j * task.asked + 1] for j in range(queries)}) == queries  # distinct keys asked
        assert [t for t, scored in zip(row, m) if scored] == answer and sum(m) == queries * values * 2
        # one needle of the first key asked sits at the depth: its filler before is round(d · n_fill)
        first = row[len(body) + 1]
        fillers = [i - task.block * sum(j < i for j in starts) for i in starts if body[i + 1] == first]
        assert round(d * n_fill) in fillers
    assert task.min_length == keys * values * task.block + tail - 1
    task.check_length(task.min_length)
    with pytest.raises(ConfigError, match="too short"):
        task.check_length(task.min_length - 1)
    assert task.chance()["exact_match"] == pytest.approx(0.1 ** (queries * values * 2))


def test_multi_value_and_multi_query_configs():
    mv = instantiate(compose(["task=ruler_niah_multivalue_tokens"]).task, "task")
    mq = instantiate(compose(["task=ruler_niah_multiquery_tokens"]).task, "task")
    assert (mv.name, mv.keys, mv.values, mv.queries) == ("ruler_niah_2v", 1, 2, 1)
    assert (mq.name, mq.keys, mq.values, mq.queries) == ("ruler_niah_2k_2q", 2, 1, 2)
    assert mv.min_length <= 16 and mq.min_length <= 16  # the config tests' train.seq_len
    with pytest.raises(ConfigError, match=r"task.queries in 1..task.keys, got 1, 3"):
        NeedleTokenTask(keys=2, queries=3)


@pytest.mark.parametrize("task", ["ruler_niah_single", "ruler_niah_multiquery_tokens"])
def test_token_versions_run_end_to_end(cli, tmp_path, task):
    code, out, err = cli(
        "extrapolate", "--pe", "rope", "--task", task, "--lengths", "16,32", "--results-dir", tmp_path,
        "train.steps=2", "train.seq_len=16",
    )  # fmt: skip
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    table = pd.read_csv(run / "table.csv")
    row = table[table.metric == "exact_match"].iloc[0]
    chance = {"ruler_niah_single": 1e-5, "ruler_niah_multiquery_tokens": 1e-4}[task]
    assert row.chance == pytest.approx(chance) and 0 <= row["16"] <= 1 and 0 <= row["32"] <= 1
