"""One edit per extension, from outside the repository: a researcher's module and YAML in their
own folder, used with --config-dir, flow through every command with no other edit.

The modules are tests/extensions/toy*.py, copied into a temporary folder next to the YAML; each
command runs in a fresh process (the folder goes on its sys.path, nowhere else).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

TOYS = Path(__file__).parent.parent / "extensions"
TINY = ["experiment=smoke", "train.steps=2", "eval.max_windows=2", "model.d_model=16", "model.mlp_hidden=32"]
YAML = {
    "pe/fixedbias.yaml": """description: one fixed distance penalty slope on every head (toy)
_target_: toyscheme.FixedBias
n_heads: ${model.n_heads}
slope: 0.1
""",
    "scale/sqrtpi.yaml": """description: "rope: frequencies / sqrt(factor) (toy)"
_target_: toyscale.SqrtPI
factor: null
original_length: ${train.seq_len}
""",
    "task/echo.yaml": """description: repeat the current token (toy)
_target_: toytask.Echo
vocab: 8
""",
}


@pytest.fixture
def folder(tmp_path):
    """The researcher's config folder: three modules and their three YAML files."""
    mine = tmp_path / "mine"
    mine.mkdir()
    for module in TOYS.glob("toy*.py"):
        shutil.copy(module, mine / module.name)
    for name, text in YAML.items():
        (mine / name).parent.mkdir(exist_ok=True)
        (mine / name).write_text(text)
    return mine


def posenc(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "POSENC_CONFIG_DIR"} | {"OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "posenc", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )
    return out.returncode, out.stdout, out.stderr


def only_run(results):
    (run,) = (results / "runs").iterdir()
    return run


@pytest.mark.slow  # five fresh processes: about 30 s on a quiet machine
def test_a_scheme_flows_through_list_train_extrapolate_and_check(folder, tmp_path):
    code, out, err = posenc("list", "pe", "--config-dir", folder, cwd=tmp_path)
    assert code == 0 and "fixedbias" in out and "rope" in out, err
    code, _, err = posenc("list", "pe", cwd=tmp_path)
    assert code == 0 and "fixedbias" not in _  # the folder is what adds it

    code, _, err = posenc(
        "train",
        "--config-dir",
        folder,
        "--pe",
        "fixedbias",
        "-q",
        "--results-dir",
        tmp_path / "train",
        *TINY,
        cwd=tmp_path,
    )
    assert code == 0, err
    table = pd.read_csv(only_run(tmp_path / "train") / "table.csv")
    assert table.loc[0, "pe"] == "fixedbias" and table.loc[0, "steps"] == 2 and 3 < table.loc[0, "val_bpb"] < 12

    code, _, err = posenc(
        "extrapolate",
        "--config-dir",
        folder,
        "--pe",
        "fixedbias",
        "--lengths",
        "32,64",
        "-q",
        "--results-dir",
        tmp_path / "extrapolate",
        *TINY,
        cwd=tmp_path,
    )
    assert code == 0, err
    table = pd.read_csv(only_run(tmp_path / "extrapolate") / "table.csv")
    assert table[["pe", "scale", "metric"]].values.tolist() == [
        ["fixedbias", "none", "bpb"],
        ["fixedbias", "none", "ppl"],
    ]
    assert table[["32", "64"]].notna().all().all()

    code, out, err = posenc(
        "check", "--config-dir", folder, "--pe", "fixedbias", "-q", "--results-dir", tmp_path / "check", cwd=tmp_path
    )
    assert code == 0, out + err
    table = pd.read_csv(only_run(tmp_path / "check") / "check.csv")
    # chosen by capability: a bias, so the offset-only check, and it passes on -slope·|i-j|
    assert table[["claim", "pe"]].values.tolist() == [["C8", "fixedbias"]] and table.passed.all()
    assert (
        table.check[0] == "bias(i, j) depends only on i − j" and (only_run(tmp_path / "check") / "c8_bias.png").exists()
    )


@pytest.mark.slow  # three fresh processes
def test_a_rope_scaling_flows_through_list_and_extrapolate(folder, tmp_path):
    code, out, err = posenc("list", "scale", "--config-dir", folder, cwd=tmp_path)
    assert code == 0 and "sqrtpi" in out and "yarn" in out, err
    code, _, err = posenc(
        "extrapolate",
        "--config-dir",
        folder,
        "--pe",
        "rope",
        "--scale",
        "none,sqrtpi",
        "--lengths",
        "32,64",
        "-q",
        "--results-dir",
        tmp_path,
        *TINY,
        cwd=tmp_path,
    )
    assert code == 0, err
    table = pd.read_csv(only_run(tmp_path) / "table.csv").set_index(["scale", "metric"])
    none, toy = table.loc[("none", "bpb")], table.loc[("sqrtpi", "bpb")]
    assert toy["32"] == none["32"]  # the identity at the trained length (factor 1)
    assert toy["64"] != none["64"]  # frequencies / √2 at twice the length


@pytest.mark.slow  # two fresh processes and a training
def test_a_task_flows_through_list_and_train(folder, tmp_path):
    code, out, err = posenc("list", "task", "--config-dir", folder, cwd=tmp_path)
    assert code == 0 and "echo" in out and "passkey" in out, err
    code, _, err = posenc(
        "train", "--config-dir", folder, "--task", "echo", "-q", "--results-dir", tmp_path, *TINY, cwd=tmp_path
    )
    assert code == 0, err
    table = pd.read_csv(only_run(tmp_path) / "table.csv")
    # an answer-only task with no corpus: accuracy on the echoed tokens, no unigram baseline
    assert table.loc[0, "task"] == "echo" and "unigram_bpb" not in table and 0 <= table.loc[0, "val_accuracy"] <= 1


@pytest.mark.parametrize(
    "change,message",
    [
        (
            lambda d: (d / "pe" / "rope.yaml").write_text("_target_: toyscheme.FixedBias\n"),
            "pe/rope.yaml: option 'rope' already exists in pe; give yours another name",
        ),
        (
            lambda d: (d / "toyscheme.py").unlink(),
            "pe._target_: cannot import 'toyscheme.FixedBias' (No module named 'toyscheme')",
        ),
    ],
)
def test_mistakes_in_the_folder_are_one_line_exit_2_and_nothing_written(folder, tmp_path, change, message):
    change(folder)
    code, out, err = posenc(
        "train",
        "--config-dir",
        folder,
        "--pe",
        "fixedbias",
        "-q",
        "--results-dir",
        tmp_path / "res",
        *TINY,
        cwd=tmp_path,
    )
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "res").exists()


def test_a_config_dir_that_is_not_a_folder_is_exit_2(tmp_path):
    code, _, err = posenc("list", "--config-dir", tmp_path / "missing", cwd=tmp_path)
    assert code == 2 and "--config-dir" in err and "does not exist" in err


def test_a_suite_in_the_folder_plans_with_its_own_scheme(folder, tmp_path):
    """Fails on the old loader: ``posenc list suite`` showed a suite of the folder, but ``--suite``
    read it from the built-in tree (FileNotFoundError); and ``posenc suite`` had no --config-dir."""
    (folder / "suite").mkdir()
    (folder / "suite" / "mine.yaml").write_text(
        "description: my scheme against rope\nseeds: [0]\nsweeps:\n"
        "  train:\n    select: {pe: [fixedbias, rope]}\n    overrides: [experiment=smoke, train.steps=2]\n"
    )
    code, out, err = posenc(
        "suite", "--config-dir", folder, "--suite", "mine", "--dry-run", "--results-dir", tmp_path / "res", cwd=tmp_path
    )
    assert code == 0, err
    assert "suite mine: 2 jobs in 1 sweeps" in out and "  pe: fixedbias, rope" in out  # both schemes planned
    assert not (tmp_path / "res").exists()
