"""Loggers (``logger=csv|tensorboard|mlflow|wandb``, several at once) fed by a real training run,
each read back with its own tool: TensorBoard's event reader, an MLflow file store's client, the
records of a W&B offline run; a logger whose package is missing stops the command in one line."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pandas as pd
import pytest

from posenc.engine import loggers

SMOKE = ["experiment=smoke", "train.steps=6", "train.eval_every=3", "train.checkpoint_every=3", "train.log_every=2"]
STAGE = "train lm_tiny/rope/text"


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """One real ``posenc train`` with every logger (slow: W&B starts its service); its run folder and
    its metrics.jsonl records."""
    import sys

    from posenc.cli.app import main

    root = tmp_path_factory.mktemp("loggers")
    args = ["posenc", "train", "-q", "--pe", "rope", "--results-dir", str(root), *SMOKE]
    args += ["logger=[csv,tensorboard,mlflow,wandb]", "name=ablation a", "tags=[long,rope]"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", args)
        mp.setenv("WANDB_MODE", "offline")
        with pytest.raises(SystemExit) as stop:
            main()
    assert stop.value.code in (0, None)
    (run,) = (root / "runs").iterdir()
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return root, run, records


def series(records, key):
    return [(r["step"], r[key]) for r in records if key in r]


def same(got, want, rel=1e-12):
    """The same steps, and values equal to ``rel`` (float32 in a TensorBoard event file)."""
    assert [s for s, _ in got] == [s for s, _ in want] and want
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=rel)


@pytest.mark.slow
def test_the_run_folder_and_provenance_carry_the_name_and_tags(logged):
    root, run, records = logged
    assert run.name.split("-")[2:6] == ["ablation_a", "lm_tiny", "rope", "text"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["provenance"]["name"] == "ablation a" and summary["provenance"]["tags"] == ["long", "rope"]
    assert summary["provenance"]["dirty"] in (True, False) and summary["run_dir"] == str(run.resolve())
    assert series(records, "train_loss") and [s for s, _ in series(records, "val_loss")] == [3, 6]


@pytest.mark.slow
def test_csv_holds_every_number_of_every_record(logged):
    _, run, records = logged
    table = pd.read_csv(run / "metrics.csv")
    assert list(table.columns) == ["stage", "step", "key", "value"] and set(table.stage) == {STAGE, "result"}
    scores = pd.read_csv(run / "table.csv").iloc[0]  # the run's one row of scores, as stage result
    result = table[table.stage == "result"].set_index("key").value
    assert result["val_bpb"] == scores.val_bpb and result["test_accuracy"] == scores.test_accuracy
    for key in ("train_loss", "val_loss", "lr"):
        got = table[(table.key == key) & (table.stage == STAGE)]
        same(list(zip(got.step, got.value)), series(records, key))


@pytest.mark.slow
def test_tensorboard_event_file_read_back_by_tensorboard(logged):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, run, records = logged
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert f"{STAGE}/train_loss" in events.Tags()["scalars"]
    for key in ("train_loss", "val_loss"):
        got = [(e.step, e.value) for e in events.Scalars(f"{STAGE}/{key}")]
        same(got, series(records, key), rel=1e-6)


@pytest.mark.slow
def test_mlflow_runs_read_back_from_the_file_store(logged):
    from mlflow.tracking import MlflowClient

    root, run, records = logged
    client = MlflowClient(tracking_uri=(root / "mlruns").resolve().as_uri())
    (found,) = client.search_runs([client.get_experiment_by_name("posenc").experiment_id])
    assert found.info.status == "FINISHED" and found.info.run_name == "ablation a"
    assert {"long", "rope"} <= set(found.data.tags) and found.data.tags["posenc.run_dir"] == str(run.resolve())
    assert found.data.params["train.steps"] == "6" and found.data.params["choices.pe"] == "rope"
    for key in ("train_loss", "val_loss"):
        history = client.get_metric_history(found.info.run_id, f"{STAGE}/{key}")
        same([(m.step, m.value) for m in history], series(records, key))
    assert found.data.metrics["result/val_bpb"] == pytest.approx(pd.read_csv(run / "table.csv").val_bpb[0])
    (artifact,) = client.list_artifacts(found.info.run_id, "tables")
    assert artifact.path == "tables/table.csv"


def wandb_records(path: Path) -> list:
    """The protobuf records of a W&B offline run file (LevelDB's log format: a 7-byte file header,
    32 KiB blocks of chunks, each with a checksum, a length and a type: full, first, middle, last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, out, pending = path.read_bytes(), 32 * 1024, [], b""
    assert data[:4] == b":W&B"
    at = 7
    while at + 7 <= len(data):
        if block - at % block < 7:  # a block's tail too short for a chunk header is padding
            at += block - at % block
            continue
        _, length, kind = struct.unpack("<IHB", data[at : at + 7])
        pending += data[at + 7 : at + 7 + length]
        at += 7 + length
        if kind in (1, 4):  # full or last: a record is complete
            record = pb.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


@pytest.mark.slow
def test_wandb_offline_run_holds_the_history(logged):
    _, run, records = logged
    (file,) = (run / "wandb").glob("offline-run-*/run-*.wandb")
    history = {}
    kinds = set()
    for record in wandb_records(file):
        kinds.add(record.WhichOneof("record_type"))
        if record.WhichOneof("record_type") == "history":
            items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
            history[items["_step"]] = items  # W&B's own step, one a record
        elif record.WhichOneof("record_type") == "run":
            assert record.run.display_name == "ablation a" and list(record.run.tags) == ["long", "rope"]
    assert {"run", "history", "exit"} <= kinds
    for key in ("train_loss", "val_loss"):
        tag = f"{STAGE}/{key}"
        same([(h[f"{STAGE}/step"], h[tag]) for _, h in sorted(history.items()) if tag in h], series(records, key))
    (result,) = [h for h in history.values() if "result/val_bpb" in h]
    assert result["result/val_bpb"] == pytest.approx(pd.read_csv(run / "table.csv").val_bpb[0])
    assert result["result/step"] == records[-1]["step"]  # a record without a step takes the last


@pytest.mark.parametrize("option", ["tensorboard", "mlflow", "wandb"])  # each option's package and extra: its name
def test_a_missing_logger_package_is_one_line_naming_its_extra_before_any_work(cli, tmp_path, monkeypatch, option):
    real = loggers.importlib.util.find_spec
    monkeypatch.setattr(loggers.importlib.util, "find_spec", lambda n, *a: None if n == option else real(n, *a))
    code, out, err = cli("train", "--results-dir", tmp_path, "-q", *SMOKE, f"logger=[csv,{option}]")
    assert code == 2 and not (tmp_path / "runs").exists()
    assert err.strip() == f"error: logger={option} needs the '{option}' package: pip install 'posenc[{option}]'"


def test_an_unknown_logger_lists_the_options(cli, tmp_path):
    code, _, err = cli("train", "--results-dir", tmp_path, "-q", *SMOKE, "logger=[csv,tb]")
    assert code == 2 and "unknown logger 'tb'; valid: csv, mlflow, tensorboard, wandb" in err


def test_records_without_a_step_take_the_last_and_only_numbers_are_kept():
    sink = loggers.CSVLogger()
    assert sink._step({"loss": 1.0}) == 0 and sink._step({"step": 7}) == 7 and sink._step({}) == 7
    got = dict(loggers.scalars({"stage": "s", "step": 2, "loss": 1.5, "ok": True, "pe": "rope", "n": 3}))
    assert got == {"s/loss": 1.5, "s/n": 3.0}


@pytest.mark.slow
def test_a_sweeps_jobs_log_into_one_store_and_posenc_runs_finds_them(tmp_path):
    from mlflow.tracking import MlflowClient
    from typer.testing import CliRunner

    from posenc.cli.app import app

    tiny = ["experiment=smoke", "train.steps=3", "train.log_every=1", "eval.max_windows=2", "eval.periodic_windows=2"]
    args = ["sweep", *tiny, "pe=rope,nope", "logger=[csv,mlflow]", "tags=[swept]", "--results-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    runs = CliRunner().invoke(app, ["runs", "--results-dir", str(tmp_path), "-f", "json", "--where", "tags=swept"])
    listed = {r["pe"]: r for r in json.loads(runs.output)}
    assert sorted(listed) == ["nope", "rope"] and {r["status"] for r in listed.values()} == {"completed"}
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())  # the sweep's results root's store
    found = client.search_runs([client.get_experiment_by_name("posenc").experiment_id])
    assert sorted(r.data.params["choices.pe"] for r in found) == ["nope", "rope"]
    for r in found:
        run = tmp_path / listed[r.data.params["choices.pe"]]["run"]
        assert r.data.tags["posenc.run_dir"] == str(run) and (run / "metrics.csv").is_file()


@pytest.mark.slow
def test_a_resumed_run_logs_on_into_its_tracker_runs(tmp_path):
    from mlflow.tracking import MlflowClient

    from posenc.engine.context import RunContext

    node = {
        "mlflow": {"_target_": "posenc.engine.loggers.MLflowLogger", "experiment": "resumed"},
        "wandb": {"_target_": "posenc.engine.loggers.WandbLogger", "mode": "offline"},
    }
    ctx = RunContext(tmp_path, config={"logger": node})
    with pytest.raises(KeyboardInterrupt):
        with ctx.running("demo", {"a": 1}) as run:
            ctx.log(run, {"step": 1, "loss": 2.0})
            raise KeyboardInterrupt
    first = loggers.tracked(run, "mlflow")["run_id"], loggers.tracked(run, "wandb")["run_id"]
    again = RunContext(tmp_path, resume=run.path, config={"logger": node})
    with again.running("demo", {"a": 1}):
        again.log(run, {"step": 2, "loss": 1.0})
    assert (loggers.tracked(run, "mlflow")["run_id"], loggers.tracked(run, "wandb")["run_id"]) == first
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    (found,) = client.search_runs([client.get_experiment_by_name("resumed").experiment_id])
    assert found.info.run_id == first[0] and found.info.status == "FINISHED"
    assert [(m.step, m.value) for m in client.get_metric_history(first[0], "loss")] == [(1, 2.0), (2, 1.0)]
    losses = [  # W&B's offline runs of that id (wandb sync joins them), in the order they ran
        json.loads(item.value_json)
        for file in sorted((run.path / "wandb").glob(f"offline-run-*-{first[1]}*/run-{first[1]}.wandb"))
        for record in wandb_records(file)
        if record.WhichOneof("record_type") == "history"
        for item in record.history.item
        if ("/".join(item.nested_key) or item.key) == "loss"
    ]
    assert losses == [2.0, 1.0]


def test_the_real_model_scorer_sends_each_cell_to_the_sinks(real_models, tmp_path):
    from posenc.engine.config import compose
    from posenc.engine.context import RunContext
    from posenc.experiments.real import Real

    class Recorder:
        def __init__(self):
            self.records = []

        def open(self, run, config): ...

        def log(self, record):
            self.records.append(dict(record))

        def table(self, name, table, path): ...

        def close(self, status): ...

    sink = Recorder()
    overrides = ["experiment=real", f"model.path='{real_models['tied']}'", "model.device=cpu"]
    overrides += ["real.scales=[pi]", "real.lengths=[16,32]", "real.windows=1"]
    result = Real().run(compose(overrides), RunContext(tmp_path, sinks=[sink]))
    cells = [r for r in sink.records if r["stage"] != "result"]
    assert sorted({r["stage"] for r in cells}) == ["forward passes none window 0", "forward passes pi window 0"]
    table = result.table.rename(columns=str)  # scale, metric, then one column a length
    for r in cells:  # one window: the table's perplexity is the cell's
        (ppl,) = table[(table.scale == r["stage"].split()[2]) & (table.metric == "ppl")][str(r["step"])]
        assert r["ppl"] == pytest.approx(ppl, rel=1e-9)
    assert sorted(r["step"] for r in cells) == [16, 16, 32, 32]
