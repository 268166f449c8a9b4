"""The train protocol on the run context: named by the config, checked before any folder, one
table with the task's own columns, progress as events, every ending marked by the context."""

import json

import pandas as pd
import pytest
from hydra.utils import instantiate

from posenc.core.errors import ConfigError, TrainingDiverged
from posenc.engine.build import build
from posenc.engine.config import compose
from posenc.engine.context import Experiment, RunContext, main_table
from posenc.experiments.train import Train

TINY = [
    "experiment=smoke",
    "train.steps=4",
    "train.eval_every=2",
    "train.checkpoint_every=2",
    "train.log_every=2",
    "eval.max_windows=4",
    "eval.periodic_windows=2",
]
VIT = ["experiment=smoke_vit", "task.val_size=8", "train.steps=2", "train.eval_every=2", "train.log_every=1"]


def test_the_config_names_the_protocol_and_its_table():
    protocol = instantiate(compose([]).protocol)
    assert isinstance(protocol, Train) and isinstance(protocol, Experiment)
    table = main_table(protocol)
    assert (table.name, table.keys, table.pairs) == ("table", ("model", "pe", "task", "seed"), ("seed",))


def test_check_refuses_before_any_folder(tmp_path):
    cfg = compose([*TINY, "pe=learned", "pe.max_len=8"])
    with pytest.raises(ConfigError, match="table of 8 positions, shorter than train.seq_len=32"):
        Train().check(cfg)
    with pytest.raises(ConfigError):
        Train().run(cfg, RunContext(tmp_path))
    assert not tmp_path.joinpath("runs").exists()


def test_a_run_writes_its_table_summary_and_provenance_and_reports_progress(tmp_path):
    events = []
    result = Train().run(compose([*TINY, "seed=2"]), RunContext(tmp_path, on_event=events.append))
    run = result.run.path
    assert run.parent == tmp_path / "runs" and {"provenance.json", "table.csv", "config.yaml"} <= {
        p.name for p in run.iterdir()
    }
    row = result.table.iloc[0]
    assert list(result.table.columns) == [
        *("model", "pe", "task", "seed", "steps", "criterion", "target", "reached_target", "target_step"),
        *("params", "train_loss", "seq_len"),
        *("val_loss", "val_bpb", "val_ppl", "val_accuracy", "val_items"),
        *("test_loss", "test_bpb", "test_ppl", "test_accuracy", "test_items"),
        *("unigram_bpb", "tokens_per_s", "seconds"),
    ]
    assert (row.model, row.pe, row.task, row.seed, row.steps, row.seq_len) == ("lm_tiny", "rope", "text", 2, 4, 32)
    written = pd.read_csv(run / "table.csv")
    assert list(written.columns) == list(result.table.columns)
    assert written.loc[0, "val_bpb"] == pytest.approx(row.val_bpb) == pytest.approx(row.val_loss / 0.6931471805599453)
    # the held-out splits are scored apart: the test split's windows are not the validation's
    assert row.test_loss != row.val_loss and row.val_items > 0 and row.test_items > 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["table"] == "table" and summary["device"] == "cpu"
    assert summary["attention_backend"] == build(compose(TINY)).model.attention_backend == "sdpa"  # chosen once
    assert len(summary["per_position_loss"]) == 32
    stages = [(e.label, e.total) for e in events if e.kind == "stage"]
    assert stages == [("train lm_tiny/rope/text", 4)]
    assert [e.done for e in events if e.kind == "advance" and "train_loss" in e.fields] == [2, 4]
    assert json.loads((run / "provenance.json").read_text())["overrides"] == []


def test_an_image_task_brings_its_own_columns(tmp_path):
    result = Train().run(compose(VIT), RunContext(tmp_path))
    columns = list(result.table.columns)
    assert columns[columns.index("train_loss") + 1 :] == [
        *("resolution", "val_loss", "val_accuracy", "val_items", "test_loss", "test_accuracy", "test_items"),
        *("chance", "images_per_s", "seconds"),
    ]
    row = result.table.iloc[0]
    assert row.resolution == 32 and row.chance == 0.25 and 0 <= row.val_accuracy <= 1 and 0 <= row.test_accuracy <= 1
    summary = result.run.read_summary()
    assert "per_position_loss" not in summary and summary["status"] == "completed"


def test_a_diverged_run_ends_failed_with_its_message(tmp_path):
    cfg = compose([*TINY, "train.lr=1e30", "train.grad_clip=1e30"])
    with pytest.raises(TrainingDiverged) as e:
        Train().run(cfg, RunContext(tmp_path))
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == f"TrainingDiverged: {e.value}"
    assert "loss became" in summary["error"]


def test_a_failure_after_training_is_marked_by_the_context(tmp_path, monkeypatch):
    import posenc.experiments.train as train

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    calls = iter([False, True])  # periodic validations pass, the final evaluation breaks
    real = train.evaluate
    monkeypatch.setattr(train, "evaluate", lambda *a, **k: broken() if next(calls, True) else real(*a, **k))
    with pytest.raises(RuntimeError, match="disk full"):
        Train().run(compose([*TINY, "train.eval_every=1000"]), RunContext(tmp_path))
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["error"]) == ("failed", "RuntimeError: disk full")
    # training ended and recorded how; the scores never came
    assert "reached_target" in summary and "val_loss" not in summary
