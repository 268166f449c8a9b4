"""posenc.experiments.cache: runs that point at one cache folder train a model once; a
half-written entry is never read; two jobs publishing the same entry keep one."""

import json
import os

import pandas as pd
import pytest

from posenc.engine.build import build
from posenc.engine.config import compose
from posenc.engine.context import RunContext
from posenc.engine.results import config_hash
from posenc.experiments.cache import HOST, TRAINED_AT, complete, publish, reap, trained, training_config
from posenc.experiments.extrapolation.protocol import Extrapolation

TINY = [
    "experiment=extrapolation",
    "pe=rope",
    "extrapolation.scales=[none,pi]",
    "extrapolation.lengths=[16,32]",
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=64",
    "train.batch_size=4",
    "train.warmup_steps=1",
    "train.seq_len=16",
    "train.steps=3",
    "train.eval_every=1000",
    "eval.max_windows=4",
    "eval.periodic_windows=2",
]


def entries(cache):
    return sorted(p.name for p in cache.iterdir())


def test_two_runs_pointing_at_one_cache_train_once(tmp_path):
    """Two sweep jobs in their own results roots with one cache_dir (what posenc suite sets): the
    second loads the first one's model, reports it reused, and scores the same numbers."""
    cache = tmp_path / "shared"
    cfg = compose([*TINY, f"cache_dir={cache}"])
    events = []
    one = Extrapolation().run(cfg, RunContext(tmp_path / "a", on_event=events.append))
    [entry] = entries(cache)
    stamp = (cache / entry / "metrics.jsonl").stat().st_mtime_ns
    two = Extrapolation().run(cfg, RunContext(tmp_path / "b", on_event=events.append))
    (first, run1), (second, run2) = (one.table, one.run), (two.table, two.run)
    # one training stage, from the first run only: the second loads the model
    assert [(e.label, e.total) for e in events if e.kind == "stage"] == [("train rope", 3)]
    assert entries(cache) == [entry] and (cache / entry / "metrics.jsonl").stat().st_mtime_ns == stamp
    assert not (tmp_path / "a" / "cache").exists() and not (tmp_path / "b" / "cache").exists()
    models1, models2 = run1.read_summary()["models"], run2.read_summary()["models"]
    assert [m["reused"] for m in models1] == [False, False] and [m["reused"] for m in models2] == [True, True]
    assert {m["cache"] for m in models1 + models2} == {str(cache / entry)}
    pd.testing.assert_frame_equal(first, second)
    assert first["32"].notna().all() and (first["steps"] == 3).all()
    # the training record comes back with the reused model, in the table and the summary
    assert [{k: m[k] for k in TRAINED_AT} for m in models2] == [{k: m[k] for k in TRAINED_AT} for m in models1]


def test_a_different_training_config_gets_its_own_entry_and_the_scale_does_not(tmp_path):
    base = build(compose(TINY)).config
    key = config_hash(training_config(base))
    assert config_hash(training_config(build(compose([*TINY, "scale=pi"])).config)) == key
    assert config_hash(training_config(build(compose([*TINY, "extrapolation.finetune_steps=3"])).config)) == key
    # the validation sample decides when a target is reached, so it is part of the training
    assert config_hash(training_config(build(compose([*TINY, "eval.periodic_windows=3"])).config)) != key
    assert config_hash(training_config(build(compose([*TINY, "seed=1"])).config)) != key


def test_a_half_written_entry_is_not_read(tmp_path):
    """An entry whose training never completed (summary 'running', weights of no model) is
    trained again and replaced; before the cache published by rename, a crashed training in
    place was such an entry."""
    setup = build(compose(TINY))
    key = config_hash(training_config(setup.config))[:16]
    entry = tmp_path / key
    (entry / "checkpoint").mkdir(parents=True)
    (entry / "checkpoint" / "model.safetensors").write_bytes(b"half")
    (entry / "summary.json").write_text(json.dumps({"status": "running"}))
    assert not complete(entry)
    out = trained(setup, tmp_path)
    assert not out.reused and out.folder == entry and complete(entry)
    assert json.loads((entry / "summary.json").read_text())["steps"] == 3
    assert entries(tmp_path) == [f".{key}.{HOST}.{os.getpid()}.stale", key]  # the half-written one, moved aside
    again = trained(build(compose(TINY)), tmp_path)
    assert again.reused and again.record == out.record


def test_a_training_in_progress_is_invisible_and_a_failed_one_leaves_nothing(tmp_path, monkeypatch):
    import posenc.experiments.cache as cache

    setup = build(compose(TINY))
    seen = []

    def failing_fit(setup, run, on_log):
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        raise RuntimeError("killed")

    monkeypatch.setattr(cache, "fit", failing_fit)
    with pytest.raises(RuntimeError, match="killed"):
        trained(setup, tmp_path)
    key = config_hash(training_config(setup.config))[:16]
    # while it trains: its hidden folder and the lock of its entry, removed when it ends
    assert seen == [sorted([f".{key}.{HOST}.{os.getpid()}", f".{key}.lock"])] and entries(tmp_path) == []


def test_publish_keeps_the_first_of_two_completed_trainings(tmp_path):
    """Two jobs trained the same config at once: the one that publishes second drops its copy
    and the first one's entry stays as it was."""

    def completed(name, loss):
        folder = tmp_path / name
        (folder / "checkpoint").mkdir(parents=True)
        (folder / "checkpoint" / "model.safetensors").write_bytes(b"w")
        (folder / "summary.json").write_text(json.dumps({"status": "completed", "train_loss": loss}))
        return folder

    entry = tmp_path / "abc"
    publish(completed(".abc.1", 1.0), entry)
    publish(completed(".abc.2", 2.0), entry)
    assert entries(tmp_path) == ["abc"] and json.loads((entry / "summary.json").read_text())["train_loss"] == 1.0


def test_a_killed_training_s_folder_is_removed_by_the_next_job_on_its_host(tmp_path):
    """A job killed mid-training (SIGKILL) leaves ``.<hash>.<host>.<pid>``; the next training of
    that config removes it when the pid is dead on this host, and leaves a live job's folder, another
    host's, and another config's alone."""
    import subprocess
    import sys

    setup = build(compose(TINY))
    key = config_hash(training_config(setup.config))[:16]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    keep = [f".{key}.{HOST}.{os.getppid()}", f".{key}.otherhost.{dead_pid}", f".{'0' * 16}.{HOST}.{dead_pid}"]
    for name in [f".{key}.{HOST}.{dead_pid}", f".{key}.{HOST}.{dead_pid}-1", *keep]:
        (tmp_path / name).mkdir()
    assert sorted(p.name for p in reap(tmp_path, key)) == [f".{key}.{HOST}.{dead_pid}", f".{key}.{HOST}.{dead_pid}-1"]
    out = trained(setup, tmp_path)
    assert entries(tmp_path) == sorted([*keep, key]) and out.folder.name == key
