"""``posenc extrapolate --resume RUN``: an interrupted run goes on from its cached models and the
cells it scored, to the tables of an uninterrupted run; a run of another config, a folder that
is no extrapolation and a real model are one line each."""

from __future__ import annotations

import json
import signal

import posenc.experiments.extrapolation.protocol as protocol

TINY = ["experiment=smoke", "train.steps=6", "train.seq_len=16", "eval.max_windows=4", "-q"]
ARGS = ["--pe", "rope,alibi", "--scale", "none,pi", "--lengths", "16,32", *TINY]
SCORE = protocol.score


def stop_in_call(monkeypatch, at: int | None) -> list[int]:
    """Count the scorer's calls; Ctrl-C (a SIGINT to this process) while its call ``at`` (from 1) runs."""
    calls = []

    def score(*args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            signal.raise_signal(signal.SIGINT)
        return SCORE(*args, **kwargs)

    monkeypatch.setattr(protocol, "score", score)
    return calls


def test_an_interrupted_run_resumes_with_its_own_config_to_the_clean_tables(cli, tmp_path, monkeypatch):
    code, out, err = cli("extrapolate", *ARGS, "--results-dir", tmp_path / "clean")
    assert code == 0, err
    [clean] = (tmp_path / "clean" / "runs").iterdir()

    calls = stop_in_call(monkeypatch, 3)
    code, _, err = cli("extrapolate", *ARGS, "--results-dir", tmp_path / "cut")
    [run] = (tmp_path / "cut" / "runs").iterdir()
    assert code == 130 and f"3 of 6 cells scored and kept in {run}; resume with --resume {run}" in " ".join(err.split())
    assert len((run / "cells.jsonl").read_text().splitlines()) == 3

    calls = stop_in_call(monkeypatch, None)
    code, resumed_out, err = cli("extrapolate", "--resume", run, "-q")  # its own config, its own root's cache
    assert code == 0, err
    assert len(calls) == 3 and [p.name for p in (tmp_path / "cut" / "runs").iterdir()] == [run.name]
    for name in ("table.csv", "per_position.csv"):
        assert (run / name).read_bytes() == (clean / name).read_bytes()
    assert resumed_out.replace(str(run), "RUN") == out.replace(str(clean), "RUN")
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["resumes"]) == ("completed", 1)
    assert all(m["reused"] for m in summary["models"])  # both models from the cache, none trained again

    code, _, err = cli("extrapolate", "--resume", run, *ARGS)  # the same config, given again: nothing to score
    assert code == 0 and len(calls) == 3, err


def test_resuming_with_another_config_or_no_run_is_one_line(cli, tmp_path):
    code, _, err = cli("extrapolate", *ARGS, "--results-dir", tmp_path)
    assert code == 0, err
    [run] = (tmp_path / "runs").iterdir()
    code, out, err = cli("extrapolate", "--resume", run, *ARGS[:4], "--lengths", "16,48", *TINY)
    assert code == 2 and err.strip() == f"error: cannot resume '{run}': it holds another config (differs in lengths)"
    code, _, err = cli("extrapolate", "--resume", tmp_path / "nowhere", "-q")
    assert (
        code == 2
        and err.strip() == f"error: '{tmp_path / 'nowhere'}' is not a run directory (no config.yaml and summary.json)"
    )
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "config.yaml").write_text("model: {}\n")
    (tmp_path / "train" / "summary.json").write_text("{}")
    code, _, err = cli("extrapolate", "--resume", tmp_path / "train", "-q")
    assert (
        code == 2
        and err.strip() == f"error: '{tmp_path / 'train'}' is not an extrapolation run (its config.yaml lists no cells)"
    )
    code, _, err = cli("extrapolate", "--model", tmp_path / "model", "--resume", run, "-q")
    assert code == 2 and err.strip() == (
        "error: --resume is for posenc's own models; run a real model's command again: "
        "it scores only the cells its store lacks"
    )
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run.name]
