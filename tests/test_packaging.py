"""An install puts one top-level package, ``posenc``, in site-packages, and finds its config tree there."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A regular (non-editable) install of a copy of the repository into a bare target folder."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(".git", "results", "tests", "build", "*.egg-info", "__pycache__", ".venv"),
    )
    target = tmp / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    return target


@pytest.mark.slow
def test_only_posenc_is_installed_at_top_level(installed):
    packages = {p.name for p in installed.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in installed.glob("*.py")}
    assert packages | modules == {"posenc"}
    for sub in ("cli", "configs", "experiments", "benchmarks"):
        assert (installed / "posenc" / sub / "__init__.py").is_file()
    assert (installed / "posenc" / "configs" / "pe" / "rope.yaml").is_file()


def test_every_package_of_the_tree_is_installed(installed):
    """A subpackage missing from pyproject's list is left out of a wheel (an editable install hides it)."""
    folders = {"posenc": "posenc", "experiments": "posenc/experiments", "cli": "posenc/cli"}
    folders |= {"benchmarks": "posenc/benchmarks", "configs": "posenc/configs"}
    for src, dest in folders.items():
        for init in (ROOT / src).rglob("__init__.py"):
            sub = init.parent.relative_to(ROOT / src)
            assert (installed / dest / sub / "__init__.py").is_file(), f"{src}/{sub} is not installed"


@pytest.mark.slow
def test_installed_package_finds_its_config_tree(installed, tmp_path):
    code = (
        "import posenc.configs as c; from posenc.engine.config import compose, list_options; "
        "print(c.__file__); print(sorted(list_options('pe'))); print(compose(['pe=learned']).pe.max_len); "
        "import importlib; print(importlib.import_module(compose([]).protocol._target_.rsplit('.', 1)[0]).__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].startswith(str(installed))
    assert "rope" in out[1] and "nope" in out[1]
    assert out[2] == "128"
    assert out[3] == str(installed / "posenc" / "experiments" / "train.py")
