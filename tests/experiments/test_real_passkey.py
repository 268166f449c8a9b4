"""Passkey retrieval on a real model (experiment=real, real.passkey_depths): the prompt's layout
at every depth, greedy decoding as one forward per departing token, the verdict on the decoded
text, and every trial stored with what the model wrote."""

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

pytest.importorskip("transformers")

from posenc.analysis.stats import wilson_interval  # noqa: E402
from posenc.engine.config import compose  # noqa: E402
from posenc.engine.context import RunContext  # noqa: E402
from posenc.experiments.real import (  # noqa: E402
    PASSKEY_CHANCE,
    PASSKEY_FILLER,
    PASSKEY_INTRO,
    PASSKEY_NEEDLE,
    PASSKEY_QUESTION,
    Model,
    Real,
    RealSettings,
    passkey_key,
    passkey_prompt,
    passkey_verdict,
)
from posenc.pe.scaling import NoScale  # noqa: E402

DEPTHS = (0, 10, 25, 50, 75, 90, 100)


@pytest.fixture(scope="module")
def tokenizer():
    """The tests' byte-level BPE (GPT-2 style pre-tokenizer), trained offline on the corpus."""
    from hf_models import tiny_tokenizer

    return tiny_tokenizer()


def ids_of(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("length", [200, 333, 1001])
def test_needle_is_whole_and_before_the_question_at_every_depth(tokenizer, length):
    key = passkey_key(3)
    longest_sentence = max(len(ids_of(tokenizer, s)) for s in PASSKEY_FILLER)
    question = ids_of(tokenizer, PASSKEY_QUESTION)
    filler_tokens = []
    for depth in DEPTHS:
        p = passkey_prompt(tokenizer, length, depth, key)
        ids = p.ids.tolist()
        assert length - longest_sentence < len(ids) <= length
        # the needle whole, in its own tokens, then filler, then the whole question, then the answer
        assert ids[p.needle : p.needle_end] == ids_of(tokenizer, PASSKEY_NEEDLE.format(key=key))
        assert p.needle_end <= p.question == len(ids) - p.answer - len(question)
        assert ids[p.question : -p.answer] == question
        assert tokenizer.decode(ids[-p.answer :]) == f" {key}" and torch.equal(p.prompt, p.ids[: -p.answer])
        # no piece cut: the text before and after the needle is whole sentences
        before = tokenizer.decode(ids[len(ids_of(tokenizer, PASSKEY_INTRO)) : p.needle])
        after = tokenizer.decode(ids[p.needle_end : p.question])
        for part in (before, after):
            assert part == "" or (part.startswith(" ") and part.endswith("."))
            assert {s.strip() for s in part.split(".")} <= {s.strip(" .") for s in PASSKEY_FILLER} | {""}
        # tokenized piece by piece as the whole text is tokenized
        assert ids_of(tokenizer, tokenizer.decode(ids)) == ids
        filler_tokens.append((p.needle - len(ids_of(tokenizer, PASSKEY_INTRO)), p.question - p.needle_end))
    first, last = passkey_prompt(tokenizer, length, 0, key), passkey_prompt(tokenizer, length, 100, key)
    assert first.needle == len(ids_of(tokenizer, PASSKEY_INTRO))  # 0: right after the intro
    assert last.needle_end == last.question  # 100: right before the question
    # the filler before the needle grows with the depth and is depth % of it, to one sentence
    assert [b for b, _ in filler_tokens] == sorted(b for b, _ in filler_tokens)
    for depth, (b, a) in zip(DEPTHS, filler_tokens):
        assert abs(b - depth / 100 * (a + b)) <= longest_sentence


def test_prompt_too_short_and_keys(tokenizer):
    key = passkey_key(0)
    assert 10000 <= key <= 99999 and key == passkey_key(0) != passkey_key(1)
    assert len({passkey_key(t) for t in range(20)}) == 20
    with pytest.raises(Exception, match="too short for the passkey prompt"):
        passkey_prompt(tokenizer, 20, 50, key)


@pytest.mark.parametrize(
    "text, verdict",
    [
        (" 12345.", True),
        ("\n12345 is", True),
        (" 12345", None),  # a sixth digit may follow
        (" 123", None),
        ("", None),
        (" ", None),
        (" 123456", False),
        (" 12346", False),
        (" the", False),
        (" 1 2345", False),
    ],
)
def test_verdict_is_exact_match_of_the_first_number(text, verdict):
    assert passkey_verdict(text, 12345) is verdict


@pytest.fixture(scope="module")
def tiny_model(real_models):
    from posenc.models import pretrained

    source = pretrained.resolve_source(str(real_models["tied"]))
    return Model(pretrained.load_pretrained(source, pretrained.read_config(source)))


@pytest.mark.parametrize("wrong_at", [None, 0, 2])
def test_greedy_decode_is_decoding_token_by_token(tiny_model, wrong_at):
    """One forward reads greedy's tokens up to the first that departs from the answer; every
    later one takes a forward, and the tokens are those of decoding a full forward per token."""
    prompt = torch.randint(0, 384, (60,))
    greedy = prompt.clone()
    with torch.no_grad():
        for _ in range(7):
            greedy = torch.cat((greedy, tiny_model.lm(greedy[None])[0, -1].argmax()[None]))
    expected = greedy[60:].tolist()
    answer = torch.tensor(expected[:4])
    if wrong_at is not None:
        answer[wrong_at] = (answer[wrong_at] + 1) % 384
    out, forwards = tiny_model.greedy_decode(NoScale(), torch.cat((prompt, answer)), 4, lambda out: False, 7)
    assert out == expected
    assert forwards == (7 - 5 + 1 if wrong_at is None else 7 - (wrong_at + 1) + 1)
    out, forwards = tiny_model.greedy_decode(NoScale(), torch.cat((prompt, answer)), 4, lambda out: len(out) >= 1, 7)
    assert out == expected[:1] and forwards == 1


def test_every_trial_is_stored_with_its_decoded_text(real_models, tmp_path):
    assert RealSettings().passkey_trials == 20
    cfg = compose(
        [
            "experiment=real",
            f"model.path='{real_models['tied']}'",
            "model.device=cpu",
            "real.scales=[pi]",
            "real.lengths=[200,260]",
            "real.passkey_depths=[0,100]",
        ]
    )
    result = Real().run(cfg, RunContext(tmp_path))
    trials = pd.read_csv(result.run.path / "passkey_trials.csv")
    assert len(trials) == 2 * 2 * 2 * 20  # scales x lengths x depths x the default 20 trials
    assert trials.groupby(["scale", "length", "depth"]).trial.apply(sorted).map(list).eq([list(range(20))] * 8).all()
    assert list(trials.passkey) == [passkey_key(t) for t in trials.trial]
    assert (
        (trials.correct.astype(str).str.lower() == "true")
        .eq([bool(passkey_verdict(json.loads(d), k)) for d, k in zip(trials.decoded, trials.passkey)])
        .all()
    )
    assert (trials.needle < trials.question).all() and (trials.tokens <= trials.length).all()
    table = pd.read_csv(result.run.path / "passkey.csv")
    assert len(table) == 8 and (table.trials == 20).all() and (table.chance == PASSKEY_CHANCE).all()
    for row in table.itertuples():
        assert row.accuracy == row.correct / 20
        assert (row.ci95_low, row.ci95_high) == pytest.approx(wilson_interval(row.correct, 20))
    cells = [json.loads(f.read_text()) for f in (Path(result.run.read_summary()["cells"]) / "cells").rglob("*.json")]
    stored = [c for c in cells if "decoded" in c]
    assert len(stored) == 160 and all(c["forwards"] >= 1 and c["decoded_ids"] for c in stored)
    # a trial's record is what greedy decoding writes after its prompt
    p = Real().prepare(cfg)
    one = next(c for c in stored if c["scale"] == "none" and c["length"] == 260 and c["depth"] == 100)
    prompt = passkey_prompt(p.tokenizer, 260, 100, one["passkey"])
    model = p.load()
    out, _ = model.greedy_decode(NoScale(), prompt.ids, prompt.answer, lambda out: False, len(one["decoded_ids"]))
    assert out == one["decoded_ids"] and p.tokenizer.decode(out) == one["decoded"]
    assert (one["needle"], one["question"], one["tokens"]) == (prompt.needle, prompt.question, prompt.ids.numel())
