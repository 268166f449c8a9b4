import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from posenc.engine.config import list_options


def valid(group):
    return ", ".join(list_options(group))


SMOKE = ["experiment=smoke", "train.steps=6", "train.eval_every=3", "train.checkpoint_every=3", "train.log_every=2"]


def test_train_end_to_end_writes_a_complete_run_dir(cli, tmp_path):
    code, out, err = cli("train", "--pe", "sinusoidal", "--seed", "3", "--results-dir", tmp_path, "-q", *SMOKE)
    assert code == 0, err
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.split("-")[2:5] == ["lm_tiny", "sinusoidal", "text"]
    assert str(run) in out.replace("\n", "") and "val_bpb" in out
    assert sorted(p.name for p in run.iterdir()) == [
        "checkpoint",
        "config.yaml",
        "metrics.jsonl",
        "provenance.json",
        "summary.json",
        "table.csv",
        "table.md",
    ]
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["seed"] == 3 and config["choices"]["pe"] == "sinusoidal"
    assert config["train"]["steps"] == 6 and config["pe"]["dim"] == config["model"]["d_model"] == 32
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "train_loss" in r] == [2, 4, 6]
    assert [r["step"] for r in records if "val_loss" in r] == [3, 6]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 6
    assert len(summary["per_position_loss"]) == 32
    table = pd.read_csv(run / "table.csv")
    assert table.loc[0, "pe"] == "sinusoidal" and table.loc[0, "seed"] == 3
    assert table.loc[0, "val_bpb"] == pytest.approx(summary["val_bpb"])
    assert table.loc[0, "val_bpb"] == pytest.approx(table.loc[0, "val_loss"] / 0.6931471805599453)
    assert 0 < table.loc[0, "val_accuracy"] < 1
    assert (run / "table.md").read_text().startswith("| model")
    assert {"model.safetensors", "trainer.pt"} <= {p.name for p in (run / "checkpoint").iterdir()}


# One symbol to copy (x SEP x) from four: reaches 0.95 within a few dozen steps, validated every 5.
REACHABLE = [
    "experiment=smoke",
    "--task",
    "copy",
    "task.n_symbols=4",
    "train.seq_len=2",
    "train.lr=1e-2",
    "train.steps=200",
    "train.eval_every=5",
    "train.checkpoint_every=1000",
]


@pytest.mark.parametrize("extra,reached", [([], True), (["train.steps=12", "train.lr=1e-6"], False)])
def test_a_run_records_whether_and_when_it_reached_its_target(cli, tmp_path, extra, reached):
    code, out, err = cli("train", "--results-dir", tmp_path, "-q", *REACHABLE, *extra)
    assert code == 0, err
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    row = pd.read_csv(run / "table.csv").iloc[0]
    vals = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "val_accuracy" in r]
    assert summary["criterion"] == row["criterion"] == "accuracy" and summary["target"] == row["target"] == 0.95
    assert summary["reached_target"] is reached and bool(row["reached_target"]) is reached
    if reached:  # stopped at the first validation at or above 0.95, well before the cap
        assert vals[-1]["val_accuracy"] >= 0.95 > max(r["val_accuracy"] for r in vals[:-1])
        assert summary["target_step"] == row["target_step"] == summary["steps"] == vals[-1]["step"] < 200
    else:  # trained to the cap
        assert summary["target_step"] is None and pd.isna(row["target_step"]) and summary["steps"] == row["steps"] == 12


def test_progress_bar_unless_quiet(cli, tmp_path):
    code, _, err = cli("train", "--results-dir", tmp_path, *SMOKE)
    assert code == 0 and "loss" in err and "tok/s" in err
    code, _, err = cli("train", "--results-dir", tmp_path, "--quiet", *SMOKE)
    assert code == 0 and err == ""


@pytest.mark.parametrize(
    "args,message",
    [
        (["--pe", "foo"], f"unknown pe 'foo'; valid: {valid('pe')}"),
        (["--model", "gpt5"], f"unknown model 'gpt5'; valid: {valid('model')}"),
        (["--task", "imagenet"], f"unknown task 'imagenet'; valid: {valid('task')}"),
        (["train.nope=1"], "unknown override key 'train.nope'"),
        (["train.lr=fast"], "train.lr: expected float, got 'fast'"),
        (["task.path=/does/not/exist.txt"], "task.path '/does/not/exist.txt' does not exist"),
        (["model.d_model=36", "model.n_heads=4"], "rope needs an even rotary dimension"),
        (["train.seq_len=10000000"], "longer than the train split"),
        (["--pe", "learned", "pe.max_len=8"], "table of 8 positions, shorter than train.seq_len=128"),
        (["--steps", "many"], "Invalid value for '--steps'"),
        (["train.target_accuracy=1.5"], "train.target_accuracy must be in (0, 1] or null, got 1.5"),
        (["train.target_bpb=0"], "train.target_bpb must be > 0 (bits per byte) or null, got 0"),
        (["train.precision=fp8"], "train.precision 'fp8' is not one of: fp32, float32, bf16, bfloat16, fp16, float16"),
        (["train.compile=maybe"], "train.compile: expected bool, got 'maybe'"),
        (["--bogus"], "No such option"),  # Typer and click word the rest differently
    ],
)
def test_mistakes_exit_2_with_one_line_and_touch_nothing(cli, tmp_path, args, message):
    results = tmp_path / "results"
    (results / "runs" / "old").mkdir(parents=True)
    (results / "runs" / "old" / "table.csv").write_text("kept")
    before = sorted(str(p) for p in results.rglob("*"))
    code, out, err = cli("train", "--results-dir", results, "-q", *args)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(str(p) for p in results.rglob("*")) == before
    assert (results / "runs" / "old" / "table.csv").read_text() == "kept"


@pytest.mark.parametrize("command", [["train"], ["extrapolate", "--pe", "rope"], ["order"], ["check"]])
def test_results_dir_that_is_a_file_is_one_line_exit_2(cli, tmp_path, command):
    results = tmp_path / "results.txt"
    results.write_text("kept")
    code, out, err = cli(*command, "--results-dir", results, "-q")
    assert code == 2
    assert err.strip().splitlines() == [f"error: --results-dir {results} is a file; give a folder"]
    assert results.read_text() == "kept"
    code, out, err = cli(*command, "--results-dir", results / "inside", "-q")
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: --results-dir {results / 'inside'} cannot be created: {results} is a file; give a folder"
    ]


def test_task_path_directory_and_empty_file(cli, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for path, message in ((tmp_path, "is a directory"), (empty, "is empty")):
        code, _, err = cli("train", "--results-dir", tmp_path / "r", f"task.path={path}")
        assert code == 2 and message in err
    assert not (tmp_path / "r").exists()


def test_user_text_file(cli, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    code, _, err = cli("train", "--results-dir", tmp_path, "-q", f"task.path={corpus}", *SMOKE)
    assert code == 0, err
    (run,) = (tmp_path / "runs").iterdir()
    assert json.loads((run / "summary.json").read_text())["unigram_bpb"] < 4.5


def test_diverged_run_is_marked_failed(cli, tmp_path):
    code, _, err = cli("train", "--results-dir", tmp_path, "-q", *SMOKE, "train.lr=1e30", "train.grad_clip=1e30")
    assert code == 1 and "run failed: loss became" in err
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and "loss became" in summary["error"]


def test_list_reads_the_config_tree(cli):
    code, out, _ = cli("list")
    assert code == 0
    for name in ("lm_tiny", "rope", "sinusoidal", "learned", "nope", "text", "smoke"):
        assert name in out
    code, out, _ = cli("list", "pe")
    assert code == 0 and "rotary" in out and "lm_tiny" not in out
    code, _, err = cli("list", "pes")
    assert code == 2 and "unknown config group 'pes'" in err


def test_module_and_console_script_entry_points(tmp_path):
    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "posenc", "--help"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "train" in out.stdout and "list" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "posenc", "train", "--pe", "nah"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 2 and out.stderr.strip() == f"error: unknown pe 'nah'; valid: {valid('pe')}"
