"""An interrupted extrapolation resumes from its cached models and the cells it scored
(``cells.jsonl``), and its tables equal an uninterrupted run's, byte for byte."""

from __future__ import annotations

import json
import signal

import pytest
from test_extrapolation import JOB as EXTRAPOLATION_JOB

import posenc.experiments.extrapolation.protocol as protocol
from posenc.core.errors import Interrupted
from posenc.engine.config import compose
from posenc.engine.context import RunContext

SCORE = protocol.score
JOB = [*EXTRAPOLATION_JOB, "extrapolation.lengths=[8,16,32]"]  # test_extrapolation's job at three lengths
# text: 2 scales x 3 lengths; with a fixed factor each scale also fine-tunes once (2 x 2 x 3 cells);
# passkey: scored by depth at every length
SETTINGS = {
    "text": ([], 6),
    "finetuned": (["extrapolation.factor=2", "extrapolation.finetune_steps=2"], 12),
    "passkey": (["task=passkey", "task.eval_size=8", "task.trials=2", "extrapolation.lengths=[12,16,32]"], 6),
}


def counting_score(monkeypatch, fail_at: int | None = None, signal_at: int | None = None) -> list[int]:
    """Patch the scorer: count its calls; raise on call ``fail_at`` (from 1), or send this process
    a SIGINT during call ``signal_at``."""
    calls = []

    def score(*args, **kwargs):
        calls.append(1)
        if len(calls) == fail_at:
            raise RuntimeError("node lost")
        if len(calls) == signal_at:
            signal.raise_signal(signal.SIGINT)
        return SCORE(*args, **kwargs)

    monkeypatch.setattr(protocol, "score", score)
    return calls


def tables_of(run) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.path.glob("*.csv"))}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_resumed_run_scores_only_the_missing_cells_and_ends_with_the_clean_run_tables(tmp_path, monkeypatch, setting):
    extra, n_cells = SETTINGS[setting]
    cfg = compose([*JOB, *extra])
    clean = protocol.Extrapolation().run(cfg, RunContext(tmp_path / "clean"))

    calls = counting_score(monkeypatch, fail_at=4)
    with pytest.raises(RuntimeError, match="node lost"):
        protocol.Extrapolation().run(cfg, RunContext(tmp_path / "cut"))
    (folder,) = (tmp_path / "cut" / "runs").iterdir()
    assert len((folder / "cells.jsonl").read_text().splitlines()) == 3  # the cells before the failure
    assert not (folder / "table.csv").exists()

    calls = counting_score(monkeypatch)
    events = []
    resumed = protocol.Extrapolation().run(cfg, RunContext(tmp_path / "cut", resume=folder, on_event=events.append))
    assert resumed.run.path == folder and len(calls) == n_cells - 3
    assert not [e for e in events if e.kind == "stage" and e.label.startswith("train")]  # the model: from the cache
    assert f"resuming: 3 of {n_cells} cells already scored" in [e.label for e in events if e.kind == "message"]
    assert tables_of(resumed.run) == tables_of(clean.run) and len(tables_of(clean.run)) >= 2
    summary = resumed.run.read_summary()
    assert (summary["status"], summary["resumes"], summary["cells"]) == (
        "completed",
        1,
        {"scored": n_cells - 3, "reused": 3},
    )


def test_a_torn_last_line_is_scored_again(tmp_path, monkeypatch):
    cfg = compose(JOB)
    clean = protocol.Extrapolation().run(cfg, RunContext(tmp_path / "clean"))
    counting_score(monkeypatch, fail_at=3)
    with pytest.raises(RuntimeError):
        protocol.Extrapolation().run(cfg, RunContext(tmp_path / "cut"))
    (folder,) = (tmp_path / "cut" / "runs").iterdir()
    lines = (folder / "cells.jsonl").read_text().splitlines()
    (folder / "cells.jsonl").write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # killed mid-write
    calls = counting_score(monkeypatch)
    resumed = protocol.Extrapolation().run(cfg, RunContext(tmp_path / "cut", resume=folder))
    assert len(calls) == 5 and tables_of(resumed.run) == tables_of(clean.run)
    assert [json.loads(line)["key"] for line in (folder / "cells.jsonl").read_text().splitlines()] == [
        protocol.cell_key({"pe": "rope", "scale": s, "finetune_steps": 0, "seed": 0}, n)
        for s in ("none", "pi")
        for n in (8, 16, 32)
    ]


def test_a_stop_signal_ends_the_run_after_the_cell_in_progress_and_names_the_folder(tmp_path, monkeypatch):
    cfg = compose(JOB)
    clean = protocol.Extrapolation().run(cfg, RunContext(tmp_path / "clean"))
    counting_score(monkeypatch, signal_at=2)
    with pytest.raises(Interrupted) as stopped:
        protocol.Extrapolation().run(cfg, RunContext(tmp_path / "cut"))
    (folder,) = (tmp_path / "cut" / "runs").iterdir()
    assert (
        str(stopped.value)
        == f"stopped by SIGINT: 2 of 6 cells scored and kept in {folder}; resume with --resume {folder}"
    )
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "interrupted" and str(folder) in summary["error"]
    calls = counting_score(monkeypatch)
    resumed = protocol.Extrapolation().run(cfg, RunContext(tmp_path / "cut", resume=folder))
    assert len(calls) == 4 and tables_of(resumed.run) == tables_of(clean.run)
