"""The real-model protocol (experiment=real) against transformers: perplexity per length on the
same windows; its cell store, its run folder and its checks."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

pytest.importorskip("transformers")

from posenc.core.errors import ConfigError  # noqa: E402
from posenc.engine.config import compose  # noqa: E402
from posenc.engine.context import RunContext  # noqa: E402
from posenc.experiments.real import Real, length_dependent, plan_forwards  # noqa: E402
from posenc.pe.scaling import PI, DynamicNTK, NoScale, YaRN  # noqa: E402

LENGTHS = [16, 40, 100]  # original context 64: the longest is past it (factor 100 / 64)
WINDOWS, TAIL = 2, 24
HF_ROPE = {"none": None, "pi": "linear", "dynamic": "dynamic", "yarn": "yarn"}


def value(v):
    """A Hydra override value: a list as [a,b], a string quoted."""
    if isinstance(v, list):
        return "[" + ",".join(map(value, v)) + "]"
    return f"'{v}'" if isinstance(v, str) else str(v)


def real_cfg(model, *overrides, **real):
    """experiment=real on ``model`` (on the CPU) with ``real.<key>=<value>`` for each of ``real``."""
    settings = [f"real.{k}={value(v)}" for k, v in real.items()]
    return compose(["experiment=real", f"model.path={value(str(model))}", "model.device=cpu", *settings, *overrides])


def run(model, root, on_event=None, **real):
    """The protocol as a sweep job or the CLI runs it: (its main table, its run folder)."""
    result = Real().run(real_cfg(model, **real), RunContext(root, on_event=on_event))
    return result.table, result.run


def prepare(model, **real):
    return Real().prepare(real_cfg(model, **real))


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
    table, run_dir = run(
        folder, tmp_path, scales=["pi", "dynamic", "yarn"], lengths=LENGTHS, windows=WINDOWS, tail=TAIL, buckets=4
    )
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
    assert summary["status"] == "completed" and summary["forwards"] == summary["computed"] == 2 * (1 + 1 + 3 + 1)
    assert summary["tables"] == ["table", "per_position", "ratios"] and summary["reused"] == 0


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
    """An interrupted run (the store holds part of the cells) resumes where it stopped."""
    settings = dict(scales=["yarn"], lengths=[16, 32], windows=2)
    first, run_dir = run(real_models["tied"], tmp_path, **settings)
    store = Path(run_dir.read_summary()["cells"])
    assert store.parent == tmp_path / "cache" / "real"  # <results root>/cache, shared by later runs
    files = sorted(p.relative_to(store / "cells").as_posix() for p in (store / "cells").rglob("*.json"))
    assert files == ["none/32/0.json", "none/32/1.json", "yarn/32/0.json", "yarn/32/1.json"]
    assert len((run_dir.path / "cells.jsonl").read_text().splitlines()) == 4
    (store / "cells" / "yarn/32/1.json").unlink()  # as if stopped in the last forward
    events = []
    again, same_dir = run(real_models["tied"], tmp_path, events.append, **settings)
    assert same_dir.path == run_dir.path
    assert [(e.kind, e.label, e.total) for e in events[:2]] == [
        ("message", "resuming: 3 forward pass(es) already scored", None),
        ("stage", "forward passes", 32),
    ]
    assert events[-1].done == 32 and events[-1].fields == {"info": "1/1"}
    assert again.equals(first)
    events.clear()
    run(real_models["tied"], tmp_path, events.append, **settings)
    assert [(e.kind, e.label) for e in events] == [("message", "resuming: 4 forward pass(es) already scored")]
    summary = same_dir.read_summary()
    assert (summary["computed"], summary["reused"], summary["resumes"]) == (0, 4, 2)


def test_other_scales_share_the_store_and_get_their_own_run_folder(real_models, tmp_path):
    """Cells are keyed by their scale: a run of other scales scores only their cells (the
    baseline none is reused); its tables go to a run folder of its own."""
    _, pi_dir = run(real_models["tied"], tmp_path, scales=["pi"], lengths=[16, 32])
    events = []
    table, yarn_dir = run(real_models["tied"], tmp_path, events.append, scales=["yarn"], lengths=[16, 32])
    assert yarn_dir.path != pi_dir.path
    assert yarn_dir.read_summary()["cells"] == pi_dir.read_summary()["cells"]
    assert events[0].label == "resuming: 1 forward pass(es) already scored" and events[1].total == 32
    assert list(dict.fromkeys(table.scale)) == ["none", "yarn"]
    fresh, _ = run(real_models["tied"], tmp_path / "fresh", scales=["yarn"], lengths=[16, 32])
    assert table.equals(fresh)
    # cache_dir names another store: nothing there yet
    elsewhere = Real().run(
        real_cfg(real_models["tied"], f"cache_dir={value(str(tmp_path / 'other'))}", scales=["yarn"], lengths=[16, 32]),
        RunContext(tmp_path),
    )
    assert elsewhere.run.read_summary()["computed"] == 2
    assert Path(elsewhere.run.read_summary()["cells"]).parent == tmp_path / "other" / "real"


def test_files_and_baseline_row(real_models, tmp_path):
    settings = dict(scales=["ntk"], lengths=[16, 80], windows=1, buckets=5)
    prepared = prepare(real_models["gguf"], **settings)
    assert prepared.original_length == 64 and prepared.factor == pytest.approx(80 / 64)
    table, run_dir = run(real_models["gguf"], tmp_path, **settings)
    assert list(table.scale) == ["none", "none", "ntk", "ntk"]
    assert list(table.columns) == ["scale", "metric", "16", "80"]
    names = ("table.csv", "table.md", "per_position.csv", "per_position.png", "cells.jsonl", "config.yaml")
    for name in (*names, "provenance.json"):
        assert (run_dir.path / name).stat().st_size > 0, name
    assert run_dir.path.name.startswith("real-tiny-") and run_dir.read_summary()["table"] == "table"

    positions = pd.read_csv(run_dir.path / "per_position.csv")
    longest = positions[(positions.scale == "none") & (positions.length == 80)]
    assert list(longest.start) == [0, 16, 32, 47, 63] and longest.end.iloc[-1] == 79
    # the bucket means weight back to the whole-window perplexity
    mean = ((longest.end - longest.start) * longest.loss).sum() / 79
    assert math.exp(mean) == pytest.approx(table.set_index(["scale", "metric"]).loc[("none", "ppl"), "80"], rel=1e-9)


@pytest.mark.parametrize("kind", ["tied", "untied"])
def test_finetune_saves_a_checkpoint_that_transformers_scores_alike(real_models, tmp_path, kind):
    """--finetune-steps: the fine-tuned copy is a Hugging Face folder carrying its YaRN scaling;
    transformers alone, on the documented window, gives the perplexity of the row yarn+ft3."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posenc.experiments.real import documents, tokenize

    table, run_dir = run(real_models[kind], tmp_path, scales=["yarn"], lengths=[16, 80], finetune_steps=3, tail=TAIL)
    assert list(dict.fromkeys(table.scale)) == ["none", "yarn", "yarn+ft3"]
    folder = Path(run_dir.read_summary()["finetuned"]["yarn+ft3"])
    assert folder == Path(run_dir.read_summary()["cells"]) / "finetuned" / "yarn+ft3"  # in the store, with its cells
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

    p = prepare(real_models["tied"], scales=["pi"], lengths=[16, 50], windows=3, finetune_steps=1)
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

    from posenc.experiments.real import documents, tokenize

    folder = save_folder(tmp_path / "linear", rope_scaling={"rope_type": "linear", "factor": 2.0})
    assert prepare(folder, scales=["pi"], lengths=[100]).shipped == "θ = 10000, rope_type linear"
    table, _ = run(folder, tmp_path / "results", scales=["pi"], lengths=[100])
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
            ConfigError,
            match=rf"scale '{scale}' \(real.scales\) is not defined on top of the model's own "
            r"rescaling \(linear\); valid on this model: none, pi",
        ):
            Real().check(real_cfg(folder, scales=[scale], lengths=[100]))
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
    assert prepare(llama3, scales=["pi"], lengths=[100]).original_length == 32
    with pytest.raises(
        ConfigError,
        match="real.finetune_steps with scale 'pi': cannot describe 'PI' on top of the shipped rope_type 'llama3'",
    ):
        Real().check(real_cfg(llama3, scales=["pi"], lengths=[100], finetune_steps=1))


def test_ratios_pair_the_scales_window_by_window(real_models, tmp_path):
    """ratio = exp(mean over windows of loss_a − loss_b), its interval the t interval of that mean."""
    from scipy import stats as scipy_stats

    _, run_dir = run(real_models["tied"], tmp_path, scales=["pi", "yarn"], lengths=[16, 40], windows=3, tail=8)
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
    one, one_dir = run(real_models["tied"], tmp_path, scales=["pi"], lengths=[16], windows=1)
    assert not (one_dir.path / "ratios.csv").exists()


def test_more_windows_reuse_the_folder_and_its_cells(real_models, tmp_path):
    """--windows only adds cells (keyed by window): a second run with more windows scores only the
    new ones, in the same folder, and its table equals a fresh run's; asking for fewer again pools
    only those."""

    def windows(n, root=tmp_path, on_event=None, **more):
        return run(real_models["tied"], root, on_event, scales=["yarn"], lengths=[16, 32], windows=n, **more)

    one, first_dir = windows(1)
    events = []
    two, same_dir = windows(2, on_event=events.append)
    assert same_dir.path == first_dir.path
    assert events[0].label == "resuming: 2 forward pass(es) already scored" and events[1].total == 64
    fresh, fresh_dir = windows(2, tmp_path / "fresh")
    assert two.equals(fresh) and not two.equals(one)
    assert (same_dir.path / "ratios.csv").read_text() == (fresh_dir.path / "ratios.csv").read_text()
    again, _ = windows(1)
    assert again.equals(one)
    import yaml

    assert yaml.safe_load((same_dir.path / "config.yaml").read_text())["real"]["windows"] == 1  # this run's settings
    _, other = windows(1, tail=8)
    assert other.path != first_dir.path  # any other setting: another folder
    assert other.read_summary()["computed"] == 2  # and another store


def test_a_failure_mid_run_marks_the_run_failed_and_keeps_its_cells(real_models, tmp_path, monkeypatch):
    from posenc.experiments.real import Model

    calls = []
    losses = Model.losses

    def second_fails(self, *args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("out of memory")
        return losses(self, *args)

    monkeypatch.setattr(Model, "losses", second_fails)
    with pytest.raises(RuntimeError, match="out of memory"):
        run(real_models["tied"], tmp_path, scales=["yarn"], lengths=[16, 32])
    [folder] = (tmp_path / "runs").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == "RuntimeError: out of memory"
    monkeypatch.setattr(Model, "losses", losses)
    _, again = run(real_models["tied"], tmp_path, scales=["yarn"], lengths=[16, 32])
    assert again.path == folder and again.read_summary()["status"] == "completed"
    assert (again.read_summary()["computed"], again.read_summary()["reused"]) == (1, 1)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ([], "model.path is missing: give a Hugging Face folder, a .gguf file or a hub id"),
        (["model.path=/no/such/folder"], "--model '/no/such/folder' does not exist"),
        (["model=lm_tiny"], "experiment=real scores a pretrained checkpoint"),
        (["model.path=REAL", "real.windows=0"], "real.windows must be >= 1, got 0"),
        (["model.path=REAL", "real.lengths=[64]", "real.windows=100000"], "the text has"),
        (
            ["model.path=REAL", "real.scales=[clamp]"],
            "scale 'clamp' (real.scales) does not rescale a real model's RoPE",
        ),
        (
            ["model.path=REAL", "model.dtype=int8"],
            "--dtype 'int8' is not one of: fp32, float32, bf16, bfloat16, fp16, float16",
        ),
        (["model.path=REAL", "model.device=cuda:7"], "model.device 'cuda:7'"),
        (["model.path=REAL", "real.factor=0.5"], "real.factor must be >= 1, got 0.5"),
        (["model.path=REAL", "real.tail=[1]"], "real.tail: expected int"),
    ],
)
def test_check_refuses_bad_settings_before_any_work(real_models, tmp_path, overrides, message):
    """Every check is a ConfigError from ``check`` (what posenc sweep calls for each job first)."""
    if torch.cuda.device_count() > 7 and "model.device=cuda:7" in overrides:
        pytest.skip("this machine has a cuda:7")
    overrides = [o.replace("REAL", str(real_models["tied"])) for o in overrides]
    cfg = compose(["experiment=real", *overrides])
    with pytest.raises(ConfigError) as caught:
        Real().check(cfg)
    assert message in str(caught.value)
    assert not (tmp_path / "runs").exists()


def test_only_real_keys_may_be_overridden():
    from posenc.core.errors import UserError
    from posenc.experiments.real import check_overrides

    check_overrides(["real.tail=512", "model.dtype=bfloat16", "+model.path=x", "cache_dir=/c", "seed=1"])
    for bad in ("train.lr=1e-3", "pe=alibi", "pe.base=500", "task.path=x", "model=lm_tiny", "eval.max_windows=2"):
        with pytest.raises(UserError, match=f"override '{bad}' applies to posenc's own models, not to a real model"):
            check_overrides([bad])


def test_a_checkpoint_is_not_trained():
    from posenc.engine.build import build

    with pytest.raises(ConfigError, match="model 'pretrained' is a pretrained checkpoint: experiment=real scores it"):
        build(compose(["model=pretrained", "model.path=x"]))
