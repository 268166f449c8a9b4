"""The config tree must be found from a regular (non-editable) install, not only from the repo."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_installed_package_finds_its_config_tree(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "results", "tests", "build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, capture_output=True)
    code = ("import configs, posenc; from posenc.config import compose, list_options; "
            "print(configs.__file__); print(sorted(list_options('pe'))); print(compose(['pe=learned']).pe.max_len)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith(str(target))
    assert "rope" in out[1] and "nope" in out[1]
    assert out[2] == "128"
