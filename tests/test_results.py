import json
import os

import pandas as pd
import yaml

from posenc.results import RunDir, atomic_write_text, config_hash, results_root, write_table


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "a" / "b.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert os.listdir(target.parent) == ["b.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_run_dirs_are_unique_and_hold_config_and_summary(tmp_path):
    config = {"pe": {"base": 10000.0}, "seed": 0}
    runs = [RunDir.create(tmp_path, "x", config) for _ in range(3)]
    assert len({r.path for r in runs}) == 3
    assert all(r.path.parent == tmp_path / "runs" for r in runs)
    assert runs[0].path.name.endswith(f"-x-{config_hash(config)[:8]}")
    assert yaml.safe_load((runs[0].path / "config.yaml").read_text()) == config
    assert runs[0].read_summary()["status"] == "running"
    runs[0].log({"step": 1})
    runs[0].log({"step": 2})
    assert [json.loads(x)["step"] for x in (runs[0].path / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_config_hash_ignores_key_order():
    assert config_hash({"a": 1, "b": {"c": 2, "d": 3}}) == config_hash({"b": {"d": 3, "c": 2}, "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_tables_and_root(tmp_path, monkeypatch):
    df = pd.DataFrame([{"pe": "rope", "bpb": 2.123456}])
    csv, md = write_table(df, tmp_path)
    assert pd.read_csv(csv).equals(df)
    assert "| rope " in md.read_text() and "2.123" in md.read_text()
    monkeypatch.setenv("POSENC_RESULTS", str(tmp_path / "env"))
    assert results_root() == tmp_path / "env"
    assert results_root(tmp_path / "flag") == tmp_path / "flag"
