"""The run context: failure marking, provenance, declared tables, events, sinks, keyed folders."""

from __future__ import annotations

import json
import signal
from typing import Any

import pandas as pd
import pytest

from posenc.core.errors import Interrupted
from posenc.engine.context import Event, RunContext, TableSpec, error_line, main_table
from posenc.engine.results import RunDir

SPECS = (TableSpec("per_length", keys=("length",)), TableSpec("table", keys=("pe",), pairs=("seed",), main=True))


class Recorder:
    """A metric sink that keeps what it was given."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.records: list[dict[str, Any]] = []
        self.closed: list[str] = []
        self.tables: list[tuple[str, int, bool]] = []

    def open(self, run: RunDir, config: dict[str, Any]) -> None:
        self.opened.append(run.path.name)

    def log(self, record: dict[str, Any]) -> None:
        self.records.append(dict(record))

    def table(self, name: str, table: pd.DataFrame, path: Any) -> None:
        self.tables.append((name, len(table), path.is_file()))

    def close(self, status: str) -> None:
        self.closed.append(status)


def summary(run: RunDir) -> dict[str, Any]:
    return json.loads((run.path / "summary.json").read_text())


def test_a_run_that_ends_is_completed_with_provenance_and_its_tables(tmp_path):
    sink = Recorder()
    ctx = RunContext(tmp_path, sinks=[sink], overrides=["pe=rope"])
    with ctx.running("demo", {"a": 1}) as run:
        ctx.log(run, {"step": 1, "loss": 2.5})
        result = ctx.write(
            run, SPECS, {"per_length": pd.DataFrame({"length": [1]}), "table": pd.DataFrame({"pe": ["rope"]})}
        )
    assert summary(run)["status"] == "completed"
    assert summary(run)["table"] == "table" and summary(run)["tables"] == ["per_length", "table"]
    assert list(result.tables) == ["table", "per_length"] and result.table.pe.tolist() == ["rope"]
    assert (run.path / "table.csv").is_file() and (run.path / "per_length.md").is_file()
    prov = json.loads((run.path / "provenance.json").read_text())
    assert prov["overrides"] == ["pe=rope"] and prov["versions"]["torch"] and prov["hardware"]["cpus"] >= 1
    assert prov["dirty"] in (True, False) and len(prov["commit"]) == 40 and summary(run)["provenance"] == prov
    assert summary(run)["run_dir"] == str(run.path.resolve())
    assert sink.opened == [run.path.name] and sink.closed == ["completed"]
    assert sink.records == [{"step": 1, "loss": 2.5}, {"stage": "result", "pe": "rope"}]  # the main table's one row
    assert sink.tables == [("per_length", 1, True), ("table", 1, True)]
    assert [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()] == sink.records[:1]


def test_a_failure_marks_the_run_failed_with_its_error_line_and_propagates(tmp_path):
    sink = Recorder()
    ctx = RunContext(tmp_path, sinks=[sink])
    with pytest.raises(ValueError, match="bad value"):
        with ctx.running("demo", {"a": 1}) as run:
            raise ValueError("bad value\nsecond line")
    assert summary(run)["status"] == "failed" and summary(run)["error"] == "ValueError: bad value"
    assert sink.closed == ["failed"]


@pytest.mark.parametrize(
    "stop", [Interrupted(signal.SIGTERM, step=3), KeyboardInterrupt(), SystemExit(1)], ids=lambda e: type(e).__name__
)
def test_a_stop_marks_the_run_interrupted(tmp_path, stop):
    ctx = RunContext(tmp_path)
    with pytest.raises(type(stop)):
        with ctx.running("demo", {"a": 1}) as run:
            raise stop
    assert summary(run)["status"] == "interrupted"


def test_an_undeclared_table_is_refused(tmp_path):
    ctx = RunContext(tmp_path)
    with pytest.raises(KeyError, match="table 'other' is not declared; declared: per_length, table"):
        with ctx.running("demo", {}) as run:
            ctx.write(run, SPECS, {"other": pd.DataFrame({"x": [1]})})
    assert summary(run)["status"] == "failed"


def test_main_table_is_the_marked_one_else_the_first():
    class Marked:
        tables = SPECS

    class Unmarked:
        tables = (TableSpec("first"), TableSpec("second"))

    assert main_table(Marked()).name == "table" and main_table(Unmarked()).name == "first"


def test_resume_reopens_the_same_config_and_refuses_another(tmp_path):
    with RunContext(tmp_path).running("demo", {"a": 1}) as first:
        pass
    with RunContext(tmp_path, resume=first.path).running("demo", {"a": 1}) as again:
        assert again.path == first.path
    assert summary(again)["resumes"] == 1 and summary(again)["status"] == "completed"
    from posenc.core.errors import UserError

    with pytest.raises(UserError, match=r"differs in a"):
        RunContext(tmp_path, resume=first.path).open("demo", {"a": 2})


def test_a_keyed_folder_is_found_again_by_its_key_and_records_the_latest_config(tmp_path):
    ctx = RunContext(tmp_path)
    with ctx.running("real", {"windows": 1, "lengths": [8]}, key={"lengths": [8]}) as first:
        (first.path / "cells.jsonl").write_text("{}\n")
    with ctx.running("real", {"windows": 2, "lengths": [8]}, key={"lengths": [8]}) as second:
        pass
    with ctx.running("real", {"windows": 1, "lengths": [16]}, key={"lengths": [16]}) as other:
        pass
    assert second.path == first.path and (second.path / "cells.jsonl").is_file()
    assert second.read_config() == {"windows": 2, "lengths": [8]} and summary(second)["resumes"] == 1
    assert other.path != first.path


def test_events_have_one_shape_and_stage_adapts_the_training_records(tmp_path):
    events: list[Event] = []
    ctx = RunContext(tmp_path, on_event=events.append)
    on_log = ctx.stage("train rope", total=10)
    on_log({"step": 4, "train_loss": 1.5, "tokens_per_s": 100.0, "lr": 0.1})
    ctx.emit("message", "resuming: 2 cells scored")
    assert events == [
        Event("stage", "train rope", total=10),
        Event("advance", "train rope", done=4, fields={"train_loss": 1.5, "tokens_per_s": 100.0}),
        Event("message", "resuming: 2 cells scored"),
    ]
    RunContext(tmp_path).stage("quiet", 3)({"step": 1})  # no callback: nothing happens


def test_error_line_is_the_type_and_first_line():
    assert error_line(RuntimeError("a\nb")) == "RuntimeError: a" and error_line(KeyError()) == "KeyError"


def test_the_device_is_resolved_once(tmp_path):
    ctx = RunContext(tmp_path, device_name="cpu")
    assert str(ctx.device) == "cpu" and ctx.device is ctx.device


def test_a_config_name_leads_the_folder_and_goes_with_its_tags_to_the_provenance(tmp_path):
    ctx = RunContext(tmp_path, config={"name": "ablation a/b", "tags": ["long", 3]})
    with ctx.running("demo", {"a": 1}) as run:
        pass
    assert run.path.name.split("-")[2:4] == ["ablation_a_b", "demo"]
    prov = json.loads((run.path / "provenance.json").read_text())
    assert prov["name"] == "ablation a/b" and prov["tags"] == ["long", "3"]


def test_stage_records_go_to_every_sink_with_their_stage(tmp_path):
    sink = Recorder()
    ctx = RunContext(tmp_path, sinks=[sink])
    with ctx.running("demo", {"a": 1}):
        on_log = ctx.stage("train x", total=2)
        on_log({"step": 1, "train_loss": 3.0})
    assert sink.records == [{"stage": "train x", "step": 1, "train_loss": 3.0}]
