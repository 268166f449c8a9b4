"""Run directories: 8 processes writing into one results root, and checkpoint folders swapped
in whole."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from posenc.results import replace_folder, settle_folder

ROOT = Path(__file__).resolve().parents[1]
WRITER = """
import sys, time
from pathlib import Path
from posenc.results import RunDir, write_table
import pandas as pd
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
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(who), str(go)], cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for who in range(8)]
    time.sleep(1.0)
    go.touch()  # all start at once, in the same second, asking for the same folder name
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()

    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 40
    assert any(r.name.rsplit("-", 1)[1].isdigit() for r in runs)  # they asked for a taken name
    owners = set()
    for run in runs:
        assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "metrics.jsonl", "summary.json", "table.csv", "table.md"]
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
