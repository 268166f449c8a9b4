"""The extrapolation protocol: which cells a request means, checks before any work, buckets."""

import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.experiments.extrapolation.plan import plan
from posenc.experiments.extrapolation.protocol import prepare
from posenc.experiments.extrapolation.scoring import buckets

TINY = ["experiment=smoke", "train.steps=2", "train.seq_len=16"]


def cells_of(cfgs):
    return [(c.choices.pe, c.choices.scale) for c in cfgs]


def test_plan_keeps_the_pairs_where_the_scale_applies():
    cfgs = plan(["rope", "nope"], ["none", "pi", "yarn"], TINY)
    assert cells_of(cfgs) == [("rope", "none"), ("rope", "pi"), ("rope", "yarn"), ("nope", "none")]
    assert cfgs[1].scale.original_length == 16 and cfgs[1].train.steps == 2


def test_all_means_every_applicable_scale_and_longrope_only_with_its_lists():
    got = cells_of(plan(["learned", "sinusoidal"], ["all"], TINY))
    assert got == [("learned", "none"), ("learned", "clamp"), ("learned", "interpolate"), ("sinusoidal", "none")]
    lists = ["scale.short_factor=[1,1,1,1]", "scale.long_factor=[2,2,2,2]"]
    cfgs = plan(["rope"], ["all"], TINY + lists + ["scale.beta_fast=16"])
    assert [s for _, s in cells_of(cfgs)] == ["none", "dynamic", "llama3", "longrope", "ntk", "pi", "yarn"]
    by_scale = {c.choices.scale: c for c in cfgs}
    assert by_scale["yarn"].scale.beta_fast == 16 and list(by_scale["longrope"].scale.long_factor) == [2, 2, 2, 2]


@pytest.mark.parametrize(
    "pes,scales,extra,message",
    [
        (
            ["rope"],
            ["bogus"],
            [],
            "unknown scale 'bogus'; valid: all, none, clamp, dynamic, interpolate, llama3, longrope, ntk, pi, "
            "proportional, yarn",
        ),
        (["nope", "sinusoidal"], ["yarn"], [], "no requested scale applies to pe 'nope' (yarn); scales for nope: none"),
        (
            ["rope", "nope"],
            ["none", "interpolate"],
            [],
            "scale 'interpolate' does not apply to pe rope, nope: it rescales learned position tables (pe=learned); "
            "scales that apply: rope: ",
        ),
        (["bogus"], ["none"], [], "unknown pe 'bogus'; valid: "),
        (
            ["rope"],
            ["none", "pi"],
            ["scale.beta_fast=3"],
            "unknown override key 'scale.beta_fast'; no requested scale has it",
        ),
    ],
)
def test_plan_rejects(pes, scales, extra, message):
    with pytest.raises(ConfigError) as e:
        plan(pes, scales, TINY + extra)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "extra,lengths,message",
    [
        ([], [16, 0], "evaluation length must be >= 1, got 0"),
        ([], [16, 10**6], "sequence length 1000000 is longer than the val split"),
        (["scale=longrope"], None, "scale longrope needs scale.short_factor"),
        (
            ["scale=longrope", "scale.short_factor=[1,1,1]", "scale.long_factor=[1,1,1,1]"],
            None,
            "scale 'longrope' with pe 'rope': scale.short_factor has 3 factors, but the rotary dimension 16 has 8",
        ),
        (["scale=pi", "scale.factor=0"], None, "scale.factor must be > 0, got 0.0"),
        (["scale=yarn", "scale.factor=-2"], None, "scale.factor must be > 0, got -2.0"),
        (
            ["scale=clamp"],
            None,
            "scale 'clamp' does not apply to pe 'rope': it rescales learned position tables "
            "(pe=learned); scales for rope: none, dynamic, llama3, longrope, ntk, pi, proportional, yarn",
        ),
    ],
)
def test_prepare_rejects(extra, lengths, message):
    from posenc.engine.config import compose

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        prepare([compose(TINY + extra)], lengths, 0)


def test_default_lengths_are_multiples_of_the_train_length():
    from posenc.engine.config import compose

    _, lengths = prepare([compose(TINY)], None, 0)
    assert lengths == [16, 32, 64, 128, 256]
    with pytest.raises(ConfigError, match="finetune steps must be >= 0"):
        prepare([compose(TINY)], None, -1)


def test_buckets_average_scored_positions_only():
    loss_sum = torch.tensor([1.0, 3.0, 0.0, 8.0, 2.0, 2.0], dtype=torch.float64)
    count = torch.tensor([1.0, 1.0, 0.0, 2.0, 1.0, 1.0], dtype=torch.float64)
    assert buckets(loss_sum, count, 3) == [(0, 2, 2.0), (2, 4, 4.0), (4, 6, 2.0)]
    out = buckets(torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), 8)
    assert len(out) == 4 and all(v != v for _, _, v in out)  # nothing scored: NaN


# --- the sweep job (experiment=extrapolation): one scheme, every scale that applies --------------


def test_the_job_keeps_the_scales_that_apply_and_fixes_the_factor():
    from posenc.engine.config import compose
    from posenc.experiments.extrapolation.plan import cells_of as job_cells

    rope = compose(["experiment=extrapolation", "pe=rope", *TINY[1:]])
    cfgs = job_cells(rope, ["none", "pi", "ntk", "yarn"])
    assert cells_of(cfgs) == [("rope", "none"), ("rope", "pi"), ("rope", "ntk"), ("rope", "yarn")]
    assert cfgs[1].scale.factor is None and cfgs[1].scale.original_length == 16  # the interpolation resolves
    fixed = job_cells(rope, ["pi", "yarn"], factor=4.0)  # the unscaled baseline always joins
    assert cells_of(fixed) == [("rope", "none"), ("rope", "pi"), ("rope", "yarn")]
    assert [c.scale.get("factor") for c in fixed] == [None, 4.0, 4.0] and rope.scale._target_.endswith("NoScale")
    assert cells_of(job_cells(compose(["experiment=extrapolation", "pe=alibi", *TINY[1:]]), ["none", "pi"])) == [
        ("alibi", "none")
    ]
    assert [s for _, s in cells_of(job_cells(rope, ["all"]))] == ["none", "dynamic", "llama3", "ntk", "pi", "yarn"]


@pytest.mark.parametrize(
    "pe,scales,message",
    [
        ("nope", ["pi", "yarn"], "no scale of extrapolation.scales (pi, yarn) applies to pe 'nope'"),
        ("rope", ["bogus"], "unknown scale 'bogus' in extrapolation.scales; valid: all, none, clamp"),
    ],
)
def test_the_job_names_a_scale_list_that_cannot_run(pe, scales, message):
    from posenc.engine.config import compose
    from posenc.experiments.extrapolation.plan import cells_of as job_cells

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        job_cells(compose(["experiment=extrapolation", f"pe={pe}", *TINY[1:]]), scales)


# --- the protocol on the run context ---------------------------------------------------------------

JOB = [
    "experiment=extrapolation",
    "pe=rope",
    "extrapolation.scales=[pi]",
    "extrapolation.lengths=[16,32]",
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=64",
    "train.batch_size=4",
    "train.warmup_steps=1",
    "train.seq_len=16",
    "train.steps=2",
    "train.eval_every=1000",
    "eval.max_windows=2",
    "eval.periodic_windows=2",
]


def test_the_config_names_the_protocol_and_it_declares_its_tables():
    from hydra.utils import instantiate

    from posenc.engine.config import compose
    from posenc.engine.context import Experiment, main_table
    from posenc.experiments.extrapolation.protocol import Extrapolation

    protocol = instantiate(compose(JOB).protocol)
    assert isinstance(protocol, Extrapolation) and isinstance(protocol, Experiment)
    assert [t.name for t in protocol.tables] == ["table", "per_position", "depth", "recipes"]
    assert main_table(protocol).keys == ("pe", "scale", "finetune_steps", "metric")
    assert {t.pairs for t in protocol.tables} == {("seed",)}


def test_check_refuses_a_job_before_any_folder(tmp_path):
    from posenc.engine.config import compose
    from posenc.engine.context import RunContext
    from posenc.experiments.extrapolation.protocol import Extrapolation

    cfg = compose([*JOB, "pe=nope"])
    with pytest.raises(ConfigError, match=r"no scale of extrapolation.scales \(pi\) applies to pe 'nope'"):
        Extrapolation().check(cfg)
    with pytest.raises(ConfigError, match="evaluation length must be >= 1"):
        Extrapolation().check(compose([*JOB, "extrapolation.lengths=[16,0]"]))
    with pytest.raises(ConfigError):
        Extrapolation().run(cfg, RunContext(tmp_path))
    assert not tmp_path.joinpath("runs").exists()


def test_a_job_writes_its_tables_with_the_seed_and_reports_each_stage(tmp_path):
    from posenc.engine.config import compose
    from posenc.engine.context import RunContext
    from posenc.experiments.extrapolation.protocol import Extrapolation

    events = []
    result = Extrapolation().run(compose([*JOB, "seed=3"]), RunContext(tmp_path, on_event=events.append))
    assert list(result.tables) == ["table", "per_position"]  # text has no depths
    table = result.table
    assert list(table.columns[:5]) == ["pe", "scale", "finetune_steps", "seed", "metric"]
    assert list(zip(table.scale, table.metric)) == [("none", "bpb"), ("none", "ppl"), ("pi", "bpb"), ("pi", "ppl")]
    assert (table.seed == 3).all() and (result.tables["per_position"].seed == 3).all()
    assert [(e.label, e.total) for e in events if e.kind == "stage"] == [("train rope", 2)]
    summary = result.run.read_summary()
    assert (summary["status"], summary["table"], summary["tables"]) == ("completed", "table", ["table", "per_position"])
    assert (result.run.path / "provenance.json").is_file() and summary["device"] == "cpu"


def test_a_failure_mid_run_marks_the_folder_failed(tmp_path, monkeypatch):
    import json

    import posenc.experiments.extrapolation.protocol as protocol
    from posenc.engine.config import compose
    from posenc.engine.context import RunContext

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(protocol, "score", broken)
    with pytest.raises(RuntimeError, match="out of memory"):
        protocol.Extrapolation().run(compose(JOB), RunContext(tmp_path))
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["error"]) == ("failed", "RuntimeError: out of memory")
    assert not (run / "table.csv").exists()


def test_a_fixed_factor_fine_tunes_once_at_its_target_and_scores_that_model_everywhere(tmp_path):
    from posenc.engine.config import compose
    from posenc.engine.context import RunContext
    from posenc.experiments.extrapolation.protocol import Extrapolation

    events = []
    overrides = ["extrapolation.factor=2", "extrapolation.finetune_steps=2", "extrapolation.lengths=[16,32,64]"]
    result = Extrapolation().run(compose([*JOB, *overrides]), RunContext(tmp_path, on_event=events.append))
    stages = [e.label for e in events if e.kind == "stage"]
    # one fine-tune per scale at factor x L = 32 (not one per evaluated length)
    assert stages == ["train rope", "finetune rope/none at 32", "finetune rope/pi at 32"]
    tuned = result.table[result.table.finetune_steps == 2]
    assert len(tuned) == 4 and (tuned.finetune_length == 32).all()
    assert result.table[result.table.finetune_steps == 0].finetune_length.isna().all()
    assert result.run.read_summary()["status"] == "completed"
