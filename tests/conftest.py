import sys

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run the posenc CLI in-process: returns (exit code, stdout, stderr)."""
    from cli.app import main

    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str):
        monkeypatch.setattr(sys, "argv", ["posenc", *map(str, args)])
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code or 0
        out, err = capsys.readouterr()
        return code, out, err

    return run
