"""The real-model protocol against transformers: perplexity per length on the same windows."""

import json
import math

import pandas as pd
import pytest
import torch

pytest.importorskip("transformers")

from posenc.experiments.real import RealSettings, length_dependent, plan_forwards, prepare, run  # noqa: E402
from posenc.pe.scaling import PI, DynamicNTK, NoScale, YaRN  # noqa: E402

LENGTHS = [16, 40, 100]  # original context 64: the longest is past it (factor 100 / 64)
WINDOWS, TAIL = 2, 24
HF_ROPE = {"none": None, "pi": "linear", "dynamic": "dynamic", "yarn": "yarn"}


def reference(folder, scale, factor, length, window, longest):
    """(ppl, tail_ppl) terms from transformers alone: window w of length L is
    tokens[w * longest : w * longest + L] (the documented rule)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from posenc.experiments.real import documents, tokenize

    tokens = tokenize(AutoTokenizer.from_pretrained(folder), documents(None))
    config = AutoConfig.from_pretrained(folder)
    if HF_ROPE[scale]:
        params = {"rope_type": HF_ROPE[scale], "rope_theta": 10000.0, "factor": 1.0 if scale == "dynamic" else factor}
        if scale == "yarn":
            params["original_max_position_embeddings"] = 64
        config.rope_parameters = params
    hf = AutoModelForCausalLM.from_pretrained(folder, config=config, dtype=torch.float32).eval()  # fresh: no state
    ids = tokens[window * longest : window * longest + length][None]
    with torch.no_grad():
        logits = hf(ids).logits[0, :-1]
    losses = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none").double()
    return losses.sum().item(), losses[-TAIL:].sum().item(), losses.numel(), min(TAIL, losses.numel())


@pytest.mark.slow  # four scalings x 3 lengths x 2 windows against transformers: ~25 s
@pytest.mark.parametrize("kind", ["tied", "untied"])
def test_perplexity_per_length_equals_transformers(real_models, tmp_path, kind):
    folder = real_models[kind]
    settings = RealSettings(
        model=str(folder),
        scales=["pi", "dynamic", "yarn"],
        lengths=LENGTHS,
        windows=WINDOWS,
        tail=TAIL,
        buckets=4,
        device="cpu",
    )
    table, run_dir = run(settings, tmp_path)
    factor = 100 / 64
    for scale in HF_ROPE:
        for n in LENGTHS:
            terms = [reference(folder, scale, factor, n, w, max(LENGTHS)) for w in range(WINDOWS)]
            ppl = math.exp(sum(t[0] for t in terms) / sum(t[2] for t in terms))
            tail = math.exp(sum(t[1] for t in terms) / sum(t[3] for t in terms))
            row = table[table.scale == scale].set_index("metric")
            assert row.loc["ppl", str(n)] == pytest.approx(ppl, rel=1e-4), (scale, n)
            assert row.loc["tail_ppl", str(n)] == pytest.approx(tail, rel=1e-4), (scale, n)
    # past the original context the scalings differ from the model as shipped
    rows = table[table.metric == "ppl"].set_index("scale")["100"]
    assert len(set(rows.round(6))) == 4
    summary = json.loads((run_dir.path / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["forwards"] == 2 * (1 + 1 + 3 + 1)


def test_one_forward_serves_every_length_unless_the_scale_follows_it():
    scales = {
        "none": NoScale(),
        "pi": PI(factor=2.0, original_length=64),
        "yarn": YaRN(factor=2.0, original_length=64),
        "dynamic": DynamicNTK(original_length=64),
    }
    assert [length_dependent(s) for s in scales.values()] == [False, False, False, True]
    assert length_dependent(PI(original_length=64))  # a factor taken from each length
    forwards = plan_forwards(scales, [16, 32, 64], windows=2)
    assert [(f.scale, f.length, f.serves) for f in forwards if f.window == 0] == [
        ("none", 64, (16, 32, 64)),
        ("pi", 64, (16, 32, 64)),
        ("yarn", 64, (16, 32, 64)),
        ("dynamic", 16, (16,)),
        ("dynamic", 32, (32,)),
        ("dynamic", 64, (64,)),
    ]


def test_rerun_skips_finished_cells(real_models, tmp_path):
    """An interrupted run (cells.jsonl holds part of the forwards) resumes where it stopped."""
    settings = RealSettings(model=str(real_models["tied"]), scales=["yarn"], lengths=[16, 32], windows=2, device="cpu")
    first, run_dir = run(settings, tmp_path)
    cells = (run_dir.path / "cells.jsonl").read_text().splitlines()
    assert len(cells) == 4
    (run_dir.path / "cells.jsonl").write_text("\n".join(cells[:3]) + "\n")  # as if stopped in the last forward
    events = []
    again, same_dir = run(settings, tmp_path, progress=events.append)
    assert same_dir.path == run_dir.path
    assert events[0] == {"event": "start", "forwards": 1, "tokens": 32, "skipped": 3}
    assert again.equals(first)
    events.clear()
    run(settings, tmp_path, progress=events.append)
    assert events == [{"event": "start", "forwards": 0, "tokens": 0, "skipped": 4}]


def test_files_and_baseline_row(real_models, tmp_path):
    settings = RealSettings(
        model=str(real_models["gguf"]), scales=["ntk"], lengths=[16, 80], windows=1, buckets=5, device="cpu"
    )
    prepared = prepare(settings)
    assert prepared.original_length == 64 and prepared.factor == pytest.approx(80 / 64)
    table, run_dir = run(settings, tmp_path, prepared=prepared)
    assert list(table.scale) == ["none", "none", "ntk", "ntk"]
    assert list(table.columns) == ["scale", "metric", "16", "80"]
    for name in ("table.csv", "table.md", "per_position.csv", "per_position.png", "cells.jsonl", "config.yaml"):
        assert (run_dir.path / name).stat().st_size > 0, name
    import pandas as pd

    positions = pd.read_csv(run_dir.path / "per_position.csv")
    longest = positions[(positions.scale == "none") & (positions.length == 80)]
    assert list(longest.start) == [0, 16, 32, 47, 63] and longest.end.iloc[-1] == 79
    # the bucket means weight back to the whole-window perplexity
    mean = ((longest.end - longest.start) * longest.loss).sum() / 79
    assert math.exp(mean) == pytest.approx(table.set_index(["scale", "metric"]).loc[("none", "ppl"), "80"], rel=1e-9)


def test_passkey_prompt_places_the_key_at_its_depth(real_models):
    from transformers import AutoTokenizer

    from posenc.experiments.real import passkey_key, passkey_prompt

    tokenizer = AutoTokenizer.from_pretrained(real_models["tied"])
    key = passkey_key(0)
    assert 10000 <= key <= 99999 and key == passkey_key(0) != passkey_key(1)
    needle = tokenizer(f"The pass key is {key}.", add_special_tokens=False)["input_ids"]
    starts = []
    for depth in (0, 50, 100):
        ids, answer = passkey_prompt(tokenizer, 300, depth, key)
        assert ids.numel() == 300
        assert tokenizer.decode(ids[-answer:]) == f" {key}"
        assert tokenizer.decode(ids[:-answer]).endswith("What is the pass key? The pass key is")
        text = ids.tolist()
        starts.append(next(i for i in range(len(text)) if text[i : i + len(needle)] == needle))
    assert starts[0] < starts[1] < starts[2] and starts[2] > 200
    with pytest.raises(Exception, match="too short for the passkey prompt"):
        passkey_prompt(tokenizer, 20, 50, key)


def test_greedy_reads_is_greedy_decoding(real_models):
    """One teacher-forced forward gives the verdict of decoding token by token."""
    from posenc.experiments.real import Model
    from posenc.models import pretrained

    source = pretrained.resolve_source(str(real_models["tied"]))
    model = Model(pretrained.load_pretrained(source, pretrained.read_config(source)))
    prompt = torch.randint(0, 384, (90,))
    decoded = prompt.clone()
    with torch.no_grad():
        for _ in range(4):  # greedy decoding, a full forward per token
            decoded = torch.cat((decoded, model.lm(decoded[None])[0, -1].argmax()[None]))
    assert model.greedy_reads(NoScale(), decoded, 4)
    wrong = decoded.clone()
    wrong[-2] = (wrong[-2] + 1) % 384
    assert not model.greedy_reads(NoScale(), wrong, 4)


@pytest.mark.parametrize("kind", ["tied", "untied"])
def test_finetune_saves_a_checkpoint_that_transformers_scores_alike(real_models, tmp_path, kind):
    """--finetune-steps: the fine-tuned copy is a Hugging Face folder carrying its YaRN scaling;
    transformers alone, on the documented window, gives the perplexity of the row yarn+ft3."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posenc.experiments.real import documents, tokenize

    settings = RealSettings(
        model=str(real_models[kind]), scales=["yarn"], lengths=[16, 80], finetune_steps=3, tail=TAIL, device="cpu"
    )
    table, run_dir = run(settings, tmp_path)
    assert list(dict.fromkeys(table.scale)) == ["none", "yarn", "yarn+ft3"]
    folder = run_dir.path / "finetuned" / "yarn+ft3"
    assert {"model.safetensors", "config.json", "tokenizer.json", "finetune.json"} <= {p.name for p in folder.iterdir()}
    written = json.loads((folder / "config.json").read_text())
    assert written["rope_scaling"]["rope_type"] == "yarn" and written["max_position_embeddings"] == 80
    assert written["rope_scaling"]["factor"] == pytest.approx(80 / 64)
    assert written["rope_scaling"]["original_max_position_embeddings"] == 64
    assert len(json.loads((folder / "finetune.json").read_text())["train_loss"]) == 3
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    assert hf.config.tie_word_embeddings == (kind == "tied")
    base = real_models[f"hf_{kind}"]
    assert not torch.equal(hf.model.layers[0].mlp.up_proj.weight, base.model.layers[0].mlp.up_proj.weight)  # trained
    ids = tokenize(AutoTokenizer.from_pretrained(folder), documents(None))[:80][None]
    with torch.no_grad():
        losses = torch.nn.functional.cross_entropy(hf(ids).logits[0, :-1], ids[0, 1:], reduction="none").double()
    row = table[table.scale == "yarn+ft3"].set_index("metric")
    assert row.loc["ppl", "80"] == pytest.approx(math.exp(losses.mean().item()), rel=1e-4)
    assert row.loc["tail_ppl", "80"] == pytest.approx(math.exp(losses[-TAIL:].mean().item()), rel=1e-4)
    assert row.loc["ppl", "80"] != table[table.scale == "yarn"].set_index("metric").loc["ppl", "80"]


def test_finetune_windows_come_after_the_scored_ones(real_models):
    from posenc.experiments.real import training_windows

    p = prepare(
        RealSettings(
            model=str(real_models["tied"]), scales=["pi"], lengths=[16, 50], windows=3, finetune_steps=1, device="cpu"
        )
    )
    x, y = training_windows(p, 50)(64, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (64, 50) and torch.equal(x[:, 1:], y[:, :-1])
    text = p.tokens.tolist()
    for row in x.tolist()[:8]:
        start = next(i for i in range(len(text)) if text[i : i + 50] == row)
        assert start >= 3 * 50  # past the three scored windows


def test_pi_stacks_on_a_shipped_linear_scaling(tmp_path):
    """The model ships linear ×2 (trained context 64): --scale pi divides its frequencies once more,
    transformers' linear ×(2 · 100/64); YaRN on top of it is refused with one line."""
    from hf_models import save_folder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posenc.core.errors import UserError
    from posenc.experiments.real import documents, tokenize

    folder = save_folder(tmp_path / "linear", rope_scaling={"rope_type": "linear", "factor": 2.0})
    settings = RealSettings(model=str(folder), scales=["pi"], lengths=[100], device="cpu")
    prepared = prepare(settings)
    assert prepared.shipped == "θ = 10000, rope_type linear"
    table, _ = run(settings, tmp_path / "results", prepared=prepared)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    config.rope_parameters = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0 * 100 / 64}
    hf = AutoModelForCausalLM.from_pretrained(folder, config=config, dtype=torch.float32).eval()
    ids = tokenize(AutoTokenizer.from_pretrained(folder), documents(None))[:100][None]
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(hf(ids).logits[0, :-1], ids[0, 1:]).item()
    assert table.set_index(["scale", "metric"]).loc[("pi", "ppl"), "100"] == pytest.approx(math.exp(loss), rel=1e-4)
    for scale in ("yarn", "ntk"):
        with pytest.raises(
            UserError,
            match=f"--scale '{scale}' is not defined on top of the model's own "
            r"rescaling \(linear\); valid on this model: none, pi",
        ):
            prepare(RealSettings(model=str(folder), scales=[scale], lengths=[100], device="cpu"))
    llama3 = save_folder(
        tmp_path / "llama3",
        tokenizer=AutoTokenizer.from_pretrained(folder),
        rope_scaling={
            "rope_type": "llama3",
            "factor": 2.0,
            "original_max_position_embeddings": 32,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    )
    assert prepare(RealSettings(model=str(llama3), scales=["pi"], lengths=[100], device="cpu")).original_length == 32
    with pytest.raises(
        UserError,
        match="--finetune-steps with --scale 'pi': cannot describe 'PI' on top of the shipped rope_type 'llama3'",
    ):
        prepare(RealSettings(model=str(llama3), scales=["pi"], lengths=[100], finetune_steps=1, device="cpu"))


def test_ratios_pair_the_scales_window_by_window(real_models, tmp_path):
    """ratio = exp(mean over windows of loss_a − loss_b), its interval the t interval of that mean."""
    from scipy import stats as scipy_stats

    settings = RealSettings(
        model=str(real_models["tied"]), scales=["pi", "yarn"], lengths=[16, 40], windows=3, tail=8, device="cpu"
    )
    _, run_dir = run(settings, tmp_path)
    ratios = pd.read_csv(run_dir.path / "ratios.csv")
    assert list(dict.fromkeys(zip(ratios.a, ratios.b))) == [("none", "pi"), ("none", "yarn"), ("pi", "yarn")]
    cells = {r["key"]: r for r in map(json.loads, (run_dir.path / "cells.jsonl").read_text().splitlines())}
    diffs = [
        cells[f"none/40/{w}"]["cells"]["40"]["tail_sum"] / 8 - cells[f"yarn/40/{w}"]["cells"]["40"]["tail_sum"] / 8
        for w in range(3)
    ]
    mean, half = sum(diffs) / 3, scipy_stats.t.ppf(0.975, 2) * scipy_stats.tstd(diffs) / math.sqrt(3)
    row = ratios.set_index(["a", "b", "metric", "length"]).loc[("none", "yarn", "tail_ppl", 40)]
    assert row.ratio == pytest.approx(math.exp(mean), rel=1e-9) and row.windows == 3
    assert (row.ci95_low, row.ci95_high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)), rel=1e-9)
    assert (ratios.ci95_low <= ratios.ratio).all() and (ratios.ratio <= ratios.ci95_high).all()
    assert (ratios.ci95_low > 0).all()
    # one window: no pairing, no file
    one, one_dir = run(
        RealSettings(model=str(real_models["tied"]), scales=["pi"], lengths=[16], windows=1, device="cpu"), tmp_path
    )
    assert not (one_dir.path / "ratios.csv").exists()


def test_more_windows_reuse_the_folder_and_its_cells(real_models, tmp_path):
    """--windows only adds cells (keyed by window): a second run with more windows scores only the
    new ones, in the same folder, and its table equals a fresh run's; asking for fewer again pools
    only those."""

    def settings(windows):
        return RealSettings(
            model=str(real_models["tied"]), scales=["yarn"], lengths=[16, 32], windows=windows, device="cpu"
        )

    one, first_dir = run(settings(1), tmp_path)
    events = []
    two, same_dir = run(settings(2), tmp_path, progress=events.append)
    assert same_dir.path == first_dir.path
    assert events[0] == {"event": "start", "forwards": 2, "tokens": 64, "skipped": 2}
    fresh, fresh_dir = run(settings(2), tmp_path / "fresh")
    assert two.equals(fresh) and not two.equals(one)
    assert (same_dir.path / "ratios.csv").read_text() == (fresh_dir.path / "ratios.csv").read_text()
    again, _ = run(settings(1), tmp_path)
    assert again.equals(one)
    import yaml

    assert yaml.safe_load((same_dir.path / "config.yaml").read_text())["windows"] == 1  # this run's settings
    code_changed = RealSettings(
        model=str(real_models["tied"]), scales=["yarn"], lengths=[16, 32], windows=1, tail=8, device="cpu"
    )
    _, other = run(code_changed, tmp_path)
    assert other.path != first_dir.path  # any other setting: another folder
