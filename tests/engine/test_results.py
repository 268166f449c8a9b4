"""Run directories: atomic files, unique folders (8 processes writing into one results root),
checkpoint folders swapped in whole."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from posenc.core.io import atomic_write_text, replace_folder, settle_folder, write_table
from posenc.engine.results import RunDir, config_hash, results_root


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
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("POSENC_RESULTS")
    assert results_root() == tmp_path / "results" and results_root("a/b") == tmp_path / "a" / "b"  # absolute


ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys, time
from pathlib import Path
from posenc.core.io import write_table
from posenc.engine.results import RunDir
import pandas as pd
import pytest
root, who, go = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
for i in range(5):
    run = RunDir.create(root, "same-name", {"same": "config"})  # every process asks for one name
    for step in range(1, 21):
        run.log({"step": step, "writer": who, "run": i})
    write_table(pd.DataFrame([{"writer": who, "run": i}]), run.path)
    run.update_summary(status="completed", writer=who, run=i)
"""


def test_eight_processes_writing_into_one_results_root_never_clobber_each_other(tmp_path):
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(who), str(go)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in range(8)
    ]
    time.sleep(1.0)
    go.touch()  # all start at once, in the same second, asking for the same folder name
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()

    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 40
    assert any(r.name.rsplit("-", 1)[1].isdigit() for r in runs)  # they asked for a taken name
    owners = set()
    for run in runs:
        assert sorted(p.name for p in run.iterdir()) == [
            "config.yaml",
            "metrics.jsonl",
            "summary.json",
            "table.csv",
            "table.md",
        ]
        assert yaml.safe_load((run / "config.yaml").read_text()) == {"same": "config"}
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        summary = json.loads((run / "summary.json").read_text())
        who, i = summary["writer"], summary["run"]
        assert records == [{"step": s, "writer": who, "run": i} for s in range(1, 21)]  # one writer, whole
        assert (run / "table.csv").read_text() == f"writer,run\n{who},{i}\n"
        owners.add((who, i))
    assert owners == {(w, i) for w in range(8) for i in range(5)}
    assert not list(tmp_path.rglob("*.tmp"))  # no temporary file left behind


def test_replace_folder_swaps_a_whole_folder_and_settles_a_swap_cut_between_renames(tmp_path):
    target = tmp_path / "checkpoint"
    replace_folder(target, lambda new: (new / "a").write_text("1") and (new / "b").write_text("1"))
    replace_folder(target, lambda new: (new / "a").write_text("2") and (new / "b").write_text("2"))
    assert [(p.name, p.read_text()) for p in sorted(target.iterdir())] == [("a", "2"), ("b", "2")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]

    # killed while filling the new folder: the old one stands, the partial one is dropped next time
    (tmp_path / "checkpoint.new").mkdir()
    (tmp_path / "checkpoint.new" / "a").write_text("3")
    settle_folder(target)
    assert (target / "a").read_text() == "2"
    # killed between the two renames: the complete new folder is put in place
    target.rename(tmp_path / "checkpoint.old")
    (tmp_path / "checkpoint.new" / "b").write_text("3")
    settle_folder(target)
    assert [(p.name, p.read_text()) for p in sorted(target.iterdir())] == [("a", "3"), ("b", "3")]
    replace_folder(target, lambda new: (new / "a").write_text("4"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_metrics_grow_by_one_line_a_record_and_a_torn_last_line_is_skipped(tmp_path):
    run = RunDir.create(tmp_path, "x", {"a": 1})
    path = run.path / "metrics.jsonl"
    run.log({"step": 1, "loss": 2.0})
    inode, first = path.stat().st_ino, path.read_bytes()
    run.log({"step": 2, "loss": 1.5})
    assert path.stat().st_ino == inode and path.read_bytes().startswith(first)  # appended, not rewritten
    with path.open("ab") as f:  # a crash in the middle of a write
        f.write(b'{"step": 3, "lo')
    assert run.read_records() == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}]
    run.log({"step": 3, "loss": 1.0})  # the torn line is cut off, the next record starts its own line
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]
    path.write_text('{"step": 1}\n{"ste\n{"step": 3}\n')  # damage before the last line is not hidden
    with pytest.raises(json.JSONDecodeError):
        run.read_records()


def test_rewind_keeps_the_records_up_to_a_step(tmp_path):
    run = RunDir.create(tmp_path, "x", {"a": 1})
    for step in range(1, 6):
        run.log({"step": step})
    run.rewind(3)
    run.log({"step": 4, "again": True})
    assert run.read_records() == [{"step": 1}, {"step": 2}, {"step": 3}, {"step": 4, "again": True}]
