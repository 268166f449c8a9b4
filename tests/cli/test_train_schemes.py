"""``posenc train`` with the new schemes, end to end through the real command line."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


def posenc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "posenc", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_train_alibi_end_to_end(tmp_path):
    out = posenc("train", "--pe", "alibi", "experiment=smoke", "--results-dir", str(tmp_path), "-q")
    assert out.returncode == 0, out.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["pe"] == "alibi" and summary["steps"] == 20
    table = pd.read_csv(run_dir / "table.csv")
    assert table["pe"].tolist() == ["alibi"] and math.isfinite(table["val_loss"][0])
    assert "_target_: posenc.pe.alibi.AlibiPE" in (run_dir / "config.yaml").read_text()
    assert (run_dir / "checkpoint" / "model.safetensors").exists()
    assert str(run_dir) in out.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["--pe", "xpos", "pe.layout=diagonal"], "pe.layout: 'diagonal' is not one of 'half', 'interleaved'"),
        (
            ["--pe", "rope", "pe.randomized=true", "pe.randomized_max=16"],
            "pe.randomized_max=16 is shorter than train.seq_len=32",
        ),
        (["--pe", "relative", "pe.max_distance=-3"], "pe.max_distance must be >= 0, got -3"),
        (["--pe", "learned", "pe.randomized=true"], "raise pe.max_len to at least 2048"),
        (["--pe", "nope", "pe.randomized=true"], "unknown override key 'pe.randomized'"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(cli, args, message, tmp_path):
    code, _, err = cli("train", *args, "experiment=smoke", "--results-dir", tmp_path, "-q")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err
    assert list(tmp_path.iterdir()) == []
