"""``posenc sweep experiment=real``: a real model swept like every protocol (basic launcher), its
finished cells found again by a second sweep into the same results root, and a bad path refused
before any job."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

pytest.importorskip("transformers")

from posenc.cli.app import app  # noqa: E402


def sweep(root: Path, *overrides: str):
    return CliRunner().invoke(app, ["sweep", *overrides, "--results-dir", str(root)])


def grid(folder: Path) -> list[str]:
    """2 factors x 2 scales: 4 jobs."""
    return [
        "experiment=real",
        f"model.path='{folder}'",
        "model.device=cpu",
        "real.factor=2,4",
        "real.scales=[pi],[yarn]",
        "real.lengths=[16,40]",
        "real.windows=2",
        "real.tail=8",
    ]


def test_a_second_sweep_reuses_every_finished_cell(real_models, tmp_path, monkeypatch):
    from posenc.experiments.real import Model

    forwards = []
    losses = Model.losses

    def counted(self, scale, ids, chunk):
        forwards.append(ids.numel())
        return losses(self, scale, ids, chunk)

    monkeypatch.setattr(Model, "losses", counted)
    first = sweep(tmp_path, *grid(real_models["tied"]))
    assert first.exit_code == 0, first.output
    [first_dir] = (tmp_path / "sweeps").iterdir()
    runs = pd.read_csv(first_dir / "runs.csv")
    assert runs.status.tolist() == ["completed"] * 4
    assert list(zip(runs["real.factor"], runs["real.scales"])) == [
        (2, "[pi]"),
        (2, "[yarn]"),
        (4, "[pi]"),
        (4, "[yarn]"),
    ]
    # per factor one store: the baseline none is scored once (2 windows), each scale on its 2 windows
    assert len(forwards) == 2 * (2 + 2 + 2) and set(forwards) == {40}
    summaries = [json.loads((Path(r) / "summary.json").read_text()) for r in runs.run_dir]
    assert [(s["computed"], s["reused"]) for s in summaries] == [(4, 0), (2, 2), (4, 0), (2, 2)]
    assert len(list((tmp_path / "cache" / "real").iterdir())) == 2
    for job, run in enumerate(runs.run_dir):
        assert Path(run).parent == first_dir / str(job) / "runs"  # each job's tables in its own folder
        table = pd.read_csv(Path(run) / "table.csv")
        assert list(dict.fromkeys(table.scale)) == ["none", runs["real.scales"][job].strip("[]")]

    forwards.clear()
    second = sweep(tmp_path, *grid(real_models["tied"]))
    assert second.exit_code == 0, second.output
    second_dir = next(p for p in (tmp_path / "sweeps").iterdir() if p != first_dir)
    again = pd.read_csv(second_dir / "runs.csv")
    assert again.status.tolist() == ["completed"] * 4
    assert forwards == []  # no forward pass recomputed
    summaries = [json.loads((Path(r) / "summary.json").read_text()) for r in again.run_dir]
    assert [(s["computed"], s["reused"]) for s in summaries] == [(0, 4)] * 4
    for a, b in zip(runs.run_dir, again.run_dir):
        assert Path(b).parent.parent.parent == second_dir
        assert (Path(a) / "table.csv").read_text() == (Path(b) / "table.csv").read_text()
        assert (Path(a) / "ratios.csv").read_text() == (Path(b) / "ratios.csv").read_text()


def test_a_model_path_that_does_not_exist_stops_the_sweep_before_any_job(tmp_path):
    result = sweep(tmp_path, *grid(tmp_path / "no-such-model"))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no-such-model' does not exist" in lines[0], result.output
    assert not list(tmp_path.glob("sweeps/*/0"))  # no job started
