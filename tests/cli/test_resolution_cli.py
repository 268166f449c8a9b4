"""``posenc resolution`` and ``posenc train --model vit_tiny`` end to end, and their user mistakes."""

import subprocess
import sys
import urllib.error
import urllib.request

import pandas as pd
import pytest

TINY = [
    "model.d_model=16",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=32",
    "task.val_size=8",
    "train.batch_size=4",
    "train.warmup_steps=1",
    "eval.periodic_windows=8",
]


def posenc(*args, cwd):
    return subprocess.run([sys.executable, "-m", "posenc", *args], capture_output=True, text=True, cwd=cwd)


def test_resolution_end_to_end(tmp_path, request):
    root = request.config.rootpath
    out = posenc(
        "resolution",
        "--pe",
        "learned,nope",
        "--interp",
        "bicubic",
        "--res",
        "16,32",
        "--steps",
        "2",
        "--finetune-steps",
        "1",
        "--no-antialias",
        "-q",
        "--results-dir",
        str(tmp_path),
        *TINY,
        "resolution.eval_items=8",
        cwd=root,
    )
    assert out.returncode == 0, out.stderr
    [run_dir] = (tmp_path / "runs").iterdir()
    table = pd.read_csv(run_dir / "table.csv")
    assert list(table.columns) == [
        "pe",
        "method",
        "finetune_steps",
        "seed",
        "16px",
        "32px",
        "split",
        "items",
        "steps",
        "criterion",
        "target",
        "reached_target",
        "target_step",
    ]
    assert (table.steps == 2).all() and not table.reached_target.any()  # 2 steps: short of 0.95
    assert (table.split == "test").all() and (table["items"] == 8).all()  # the held-out scenes
    assert table[["pe", "method", "finetune_steps"]].values.tolist() == [
        ["learned", "bicubic", 0],
        ["learned", "bicubic", 1],
        ["nope", "none", 0],
        ["nope", "none", 1],
    ]
    assert "│ learned │ bicubic │" in out.stdout.replace("  ", " ").replace("  ", " ")
    assert (run_dir / "similarity_learned.png").is_file() and (run_dir / "accuracy.png").is_file()
    assert "  antialias: false\n" in (run_dir / "config.yaml").read_text()  # --no-antialias reached the config


def test_train_vit_end_to_end(cli, tmp_path):
    code, out, err = cli(
        "train",
        "--model",
        "vit_tiny",
        "--pe",
        "rope2d_mixed",
        "experiment=smoke_vit",
        "train.steps=3",
        "-q",
        "--results-dir",
        tmp_path,
    )
    assert code == 0, err
    assert "val_accuracy" in out and "images_per_s" in out
    [run_dir] = (tmp_path / "runs").iterdir()
    row = pd.read_csv(run_dir / "table.csv").iloc[0]
    assert (row.model, row.pe, row.task, row.steps, row.resolution) == ("vit_tiny", "rope2d_mixed", "shapes", 3, 32)
    assert 0.0 <= row.val_accuracy <= 1.0 and row.chance == 0.25
    assert (run_dir / "checkpoint" / "model.safetensors").is_file()


def test_train_vit_with_the_original_learned_table(cli, tmp_path):
    code, out, err = cli(
        "train", "--model", "vit_tiny", "--pe", "learned", "--steps", "2", "-q", "--results-dir", tmp_path, *TINY
    )
    assert code == 0, err
    [run_dir] = (tmp_path / "runs").iterdir()
    assert pd.read_csv(run_dir / "table.csv").pe[0] == "learned"


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["resolution", "--pe", "learned", "--res", "24,30"],
            "error: resolution=30 is not divisible by model.patch_size=4; use a multiple of 4",
        ),
        (
            ["resolution", "--pe", "learned", "--interp", "nearest", "--antialias"],
            "error: resolution.antialias needs method bilinear or bicubic",
        ),
        (["resolution", "--pe", "learned", "--res", "16,abc"], "error: --res '16,abc' is not a comma list of integers"),
        (
            ["resolution", "--pe", "learned", "--interp", "bicubic,cubic"],
            "error: unknown interpolation method 'cubic'; valid: nearest, bilinear, bicubic, "
            "area, clip, extrapolate, interpolate, none",
        ),
        (
            ["resolution", "--pe", "learned,rope"],
            "error: pe 'rope' is 1D-only and does not fit the ViT's patch grid; use pe=rope2d_axial",
        ),
        (["resolution", "--pe", "nope,foo"], "error: unknown pe 'foo'; valid: "),
        (
            ["resolution", "--pe", "learned", "--task", "text"],
            "error: task 'text' does not fit model 'vit_tiny'; use --model lm_tiny",
        ),
        (
            ["train", "--model", "vit_tiny", "--pe", "sinusoidal"],
            "error: pe 'sinusoidal' is 1D-only and does not fit the ViT's patch grid; use pe=sincos2d",
        ),
        (
            ["train", "--pe", "rope2d_mixed"],
            "error: pe 'rope2d_mixed' is a 2D scheme for ViT patches; on the causal LM use pe=rope",
        ),
        (["train", "--task", "shapes"], "error: task 'shapes' does not fit model 'lm_tiny'; use --model vit_tiny"),
        (
            ["train", "--model", "vit_tiny", "task.resolution=30"],
            "error: task.resolution=30 is not divisible by model.patch_size=4",
        ),
        (
            ["train", "--model", "vit_tiny", "--task", "image_folder", "task.root=/nonexistent/imgs"],
            "error: task.root '/nonexistent/imgs' does not exist",
        ),
    ],
)
def test_user_mistakes_are_one_line_and_write_nothing(cli, tmp_path, args, message):
    code, out, err = cli(*args, "--results-dir", tmp_path, "-q")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), err
    assert not (tmp_path / "runs").exists()


def test_download_without_network_says_how_to_place_the_files(cli, tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    data = tmp_path / "data"
    code, out, err = cli(
        "train",
        "--model",
        "vit_tiny",
        "--task",
        "cifar10",
        f"task.root={data}",
        "task.download=true",
        "--results-dir",
        tmp_path,
        "-q",
    )
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: could not download cifar10 into '{data}'")
    assert "cifar-10-python.tar.gz" in line and "cifar-10-batches-py" in line and "task.download=false" in line
    assert not (tmp_path / "runs").exists()
