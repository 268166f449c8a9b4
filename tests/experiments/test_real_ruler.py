"""RULER's tasks on a real model (experiment=real task=ruler_…; posenc extrapolate --model PATH
--task ruler_…): RULER's string_match_all on hand-made outputs, a tiny random Llama end to end
through the CLI with every prompt, answer and decoded text stored, and the length too short for
the tokenizer refused in one line before any work."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

pytest.importorskip("transformers")

from posenc.analysis.stats import wilson_interval  # noqa: E402
from posenc.core.errors import ConfigError  # noqa: E402
from posenc.engine.config import compose  # noqa: E402
from posenc.engine.context import RunContext  # noqa: E402
from posenc.experiments.real import Real  # noqa: E402
from posenc.experiments.real_ruler import (  # noqa: E402
    chosen_task,
    prompt_tasks,
    prompts_of,
    ruler_plan,
    ruler_table,
    score_ruler,
)
from posenc.pe.scaling import NoScale  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    from hf_models import tiny_tokenizer

    return tiny_tokenizer()


class Written:
    """A model that writes the given text after any prompt (greedy decoding stubbed), stopping
    where the protocol's stop rule says."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts, self.calls = tokenizer, iter(texts), []

    def greedy_decode(self, scale, ids, answer, done, limit):
        tokens = self.tokenizer(next(self.texts), add_special_tokens=False)["input_ids"]
        out = []
        for t in tokens[:limit]:
            out.append(t)
            if done(out):
                break
        self.calls.append((ids, answer, limit))
        return out, len(out)


def score_written(tokenizer, task_name, texts, length=800):
    """Score ``texts`` as one trial each of ``task_name`` (trials 0, 1, …) at ``length``."""
    cfg = compose(["experiment=real", "model.path=x", f"task={task_name}", f"task.trials={len(texts)}"])
    chosen = chosen_task(cfg)
    plan = [c for c in ruler_plan(chosen, ["none"], [length]) if c[0][2] in (None, 0.5)]
    prompts = prompts_of(chosen, tokenizer, plan)
    done, stored = {}, []
    p = SimpleNamespace(tokenizer=tokenizer, scales={"none": NoScale()})
    ctx = SimpleNamespace(emit=lambda *a, **k: None)
    model = Written(tokenizer, [write(prompts[n, d, t]) for write, ((_, n, d, t), _) in zip(texts, plan)])
    score_ruler(model, plan, chosen, prompts, p, done, SimpleNamespace(add=stored.append), ctx)
    return [done[k] for _, k in plan], model, prompts, chosen


def test_string_match_all_on_hand_made_outputs(tokenizer):
    """Multi-value: right, right in other words with extra text, in upper case, partial, wrong, empty."""
    outputs = [
        lambda p: " " + ", ".join(p.answers) + ".",
        lambda p: " Sure! I found " + " and ".join(reversed(p.answers)) + ", and also 1234567, I think.",
        lambda p: " " + ", ".join(a.upper() for a in p.answers),
        lambda p: " " + ", ".join(p.answers[:2]) + ", 1111111",
        lambda p: " " + p.answers[0][:-1] + "0, 2222222, 3333333, 4444444",
        lambda p: "",
    ]
    records, model, prompts, _ = score_written(tokenizer, "ruler_niah_multivalue", outputs)
    assert [r["score"] for r in records] == [1.0, 1.0, 1.0, 0.5, 0.0, 0.0]
    assert [r["all_found"] for r in records] == [True, True, True, False, False, False]
    for r in records:  # what is stored is what was written, up to where every answer was found
        assert r["decoded"] == tokenizer.decode(r["decoded_ids"]) and len(r["answers"]) == 4
    # stopped once every answer is in the text: the right answer's trailing "." is not decoded
    assert records[0]["decoded"] == " " + ", ".join(records[0]["answers"])
    assert records[1]["decoded"].endswith(records[1]["answers"][0])
    # the model is given the prompt and the reference answer (greedy's shortcut), the answer's tokens,
    # and RULER's 128 new tokens for a needle task
    for (ids, answer, limit), p in zip(model.calls, prompts.values()):
        assert ids.tolist() == p.ids + p.answer_ids and answer == len(p.answer_ids) and limit == 128
    table = ruler_table(records)
    assert len(table) == 1 and table.depth.isna().all()  # multi-value: each trial's needles their own depths
    row = table.iloc[0]
    assert (row.score, row.all_found, row.found, row.trials) == (pytest.approx(3.5 / 6), 0.5, 3, 6)
    assert (row.ci95_low, row.ci95_high) == pytest.approx(wilson_interval(3, 6))


def test_a_single_needle_scored_by_depth(tokenizer):
    """niah_single_1 at depth 0.5: the value parsed from the prompt's needle is the answer."""
    records, _, prompts, chosen = score_written(
        tokenizer, "ruler_niah_single_1", [lambda p: " " + p.answers[0], lambda p: " 7"]
    )
    assert chosen.task.grid() == [0.0, 0.25, 0.5, 0.75, 1.0]
    for (_, d, _), p in prompts.items():
        key = re.search(r"special magic number for (\w+) in the text above", p.text).group(1)
        assert re.findall(rf"One special magic number for {key} is (\d+)\.", p.text) == p.answers
        assert d == 0.5 == p.depth
    assert [(r["depth"], r["score"], r["all_found"]) for r in records] == [(0.5, 1.0, True), (0.5, 0.0, False)]


def test_a_real_model_takes_only_prompt_tasks():
    names = prompt_tasks()
    assert {"ruler_vt", "ruler_cwe", "ruler_fwe", "ruler_niah_single_1", "ruler_niah_multiquery"} <= set(names)
    assert "ruler_niah_single" not in names and "passkey" not in names  # token tasks for posenc's own LMs
    assert chosen_task(compose(["experiment=real", "model.path=x"])) is None  # the default text: perplexity only
    with pytest.raises(ConfigError, match=r"task 'ruler_niah_single' trains posenc's own models; .*ruler_vt"):
        chosen_task(compose(["experiment=real", "model.path=x", "task=ruler_niah_single"]))


def test_end_to_end_through_the_cli(cli, real_models, tmp_path):
    code, out, err = cli(
        "extrapolate",
        "--model",
        real_models["tied"],
        "--task",
        "ruler_niah_single_1",
        "--scale",
        "pi",
        "--lengths",
        "250,300",
        "--results-dir",
        tmp_path,
        "task.trials=2",
        "task.depths=[0,1]",
    )
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    table = pd.read_csv(run / "ruler.csv")
    cells = [(s, n, d) for s in ("none", "pi") for n in (250, 300) for d in (0.0, 1.0)]
    assert sorted(zip(table.scale, table.length, table.depth)) == cells
    assert (table.trials == 2).all() and (table.task == "ruler_niah_single_1").all() and (table.seconds > 0).all()
    trials = pd.read_csv(run / "ruler_trials.csv")
    assert len(trials) == 16 and (trials.tokens <= trials.length).all()
    prompts = [json.loads(line) for line in (run / "ruler_prompts.jsonl").read_text().splitlines()]
    assert sorted((p["length"], p["depth"], p["trial"]) for p in prompts) == sorted(
        (n, d, t) for n in (250, 300) for d in (0.0, 1.0) for t in (0, 1)
    )
    by_cell = {(p["length"], p["depth"], p["trial"]): p for p in prompts}
    for row in trials.itertuples():
        prompt = by_cell[row.length, row.depth, row.trial]
        answers, decoded = json.loads(row.answers), json.loads(row.decoded)
        assert answers == prompt["answers"] and re.search(rf"is {answers[0]}\.", prompt["text"])
        assert row.score == float(answers[0] in decoded.lower()) and row.tokens == prompt["tokens"]
    for p in prompts:  # the needle first (depth 0) or last (depth 1) in the haystack
        needle = p["text"].index(f"is {p['answers'][0]}.")
        assert (needle < p["text"].index("The river")) == (p["depth"] == 0.0)
    assert "ruler_niah_single_1: string_match_all" in out
    assert (run / "ruler.png").read_bytes()[:4] == b"\x89PNG"  # the length x depth figure
    # a stored trial is what greedy decoding writes after its prompt; a rerun scores nothing again
    cfg = compose(
        [
            "experiment=real",
            f"model.path='{real_models['tied']}'",
            "real.scales=[pi]",
            "real.lengths=[250,300]",
            "task=ruler_niah_single_1",
            "task.trials=2",
            "task.depths=[0,1]",
        ]
    )
    again = Real().run(cfg, RunContext(tmp_path))
    assert again.run.path == run and again.run.read_summary()["computed"] == 0
    pd.testing.assert_frame_equal(pd.read_csv(run / "ruler.csv").drop(columns="seconds"), table.drop(columns="seconds"))
    real = Real()
    p = real.prepare(cfg)
    one = json.loads(Path(run / "cells.jsonl").read_text().splitlines()[-1])
    prompt = p.task.task.prompt(p.tokenizer, one["length"], one["trial"], one["depth"])
    ids = torch.tensor(prompt.ids + prompt.answer_ids)
    assert one["scale"] == "pi"
    decoded, _ = p.load().greedy_decode(p.scales["pi"], ids, len(prompt.answer_ids), lambda out: False, 128)
    assert decoded[: len(one["decoded_ids"])] == one["decoded_ids"]


def test_a_length_too_short_names_the_shortest_that_fits(cli, real_models, tmp_path, tokenizer):
    cfg = compose(["experiment=real", "model.path=x", "task=ruler_vt", "task.trials=20"])
    shortest = chosen_task(cfg).task.shortest(tokenizer)
    code, out, err = cli(
        "extrapolate", "--model", real_models["tied"], "--task", "ruler_vt", "--lengths", f"{shortest - 1},2000",
        "--results-dir", tmp_path / "results",
    )  # fmt: skip
    assert code == 2
    assert err.strip() == (
        f"error: real.lengths {shortest - 1} is too short for task ruler_vt on this model's tokenizer: "
        f"the shortest length that fits its prompts (answer included) is {shortest} tokens"
    )
    assert not (tmp_path / "results").exists()
    # the seed draws a prompt task's prompts, so --seed is taken (and checked after the lengths)
    code, _, err = cli(
        "extrapolate", "--model", real_models["tied"], "--task", "ruler_vt", "--lengths", "100", "--seed", "3",
        "--results-dir", tmp_path / "results",
    )  # fmt: skip
    assert code == 2 and "real.lengths 100 is too short for task ruler_vt" in err
    seeded = chosen_task(compose(["experiment=real", "model.path=x", "task=ruler_vt", "seed=3"])).task
    assert (
        seeded.seed == 3
        and seeded.prompt(tokenizer, 2000, 0).text != chosen_task(cfg).task.prompt(tokenizer, 2000, 0).text
    )
    code, _, err = cli("extrapolate", "--model", real_models["tied"], "--task", "passkey", "--results-dir", tmp_path)
    assert code == 2 and "task 'passkey' trains posenc's own models" in err and "real.passkey_depths" in err
    code, _, err = cli("extrapolate", "--pe", "rope", "--task", "ruler_vt", "--results-dir", tmp_path / "own")
    assert code == 2 and "task 'ruler_vt' is a prompt for a pretrained model's tokenizer" in err
    assert not (tmp_path / "own").exists()


def test_a_sweep_over_ruler_tasks(cli, real_models, tmp_path):
    """experiment=real sweeps the task like any option (a task's own keys as ++task.KEY: Hydra
    applies the others to the default task before it picks the swept one)."""
    code, out, err = cli(
        "sweep", "experiment=real", f"model.path='{real_models['tied']}'", "real.lengths=[500]",
        "task=ruler_vt,ruler_fwe", "++task.trials=2", "--results-dir", tmp_path,
    )  # fmt: skip
    assert code == 0, err
    [sweep] = list((tmp_path / "sweeps").iterdir())
    runs = pd.read_csv(sweep / "runs.csv")
    assert list(runs.task) == ["ruler_vt", "ruler_fwe"] and (runs.status == "completed").all()
    for job, task in enumerate(("ruler_vt", "ruler_fwe")):
        [run] = list((sweep / str(job) / "runs").iterdir())
        table = pd.read_csv(run / "ruler.csv")
        assert list(zip(table.task, table.scale)) == [(task, "none")]
        assert (table.trials == 2).all() and (table.length == 500).all()
