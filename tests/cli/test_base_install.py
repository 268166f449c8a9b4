"""The base install (``pip install -e .``, no extra): a suite's dry run plans every job without
the launcher's package, and the suite itself stops in one line naming the extra. (The basic
launcher's sweep on it: tests/cli/test_sweep.py; .ci/run runs both in a venv with no extra.)"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from posenc.cli.app import app
from posenc.launch import sweep

runner = CliRunner()
DRY = ["suite", "--quick", "--dry-run", "--only", "check"]  # one small sweep: planning all takes minutes


def without_cluster_extra(monkeypatch):
    """As on the base install: even the plugins' parent package hydra_plugins is missing."""
    for name in ("joblib", "submitit_local", "submitit_slurm"):
        _, extra = sweep.PLUGIN_LAUNCHERS[name]
        monkeypatch.setitem(sweep.PLUGIN_LAUNCHERS, name, (f"no_such_parent.{name}", extra))


@pytest.mark.slow
def test_a_dry_run_plans_without_the_launchers_package(tmp_path, monkeypatch):
    with_extra = runner.invoke(app, [*DRY, "--results-dir", str(tmp_path)])
    without_cluster_extra(monkeypatch)
    assert sweep.missing_extra("joblib") == "cluster" and sweep.missing_extra("basic") is None
    result = runner.invoke(app, [*DRY, "--results-dir", str(tmp_path)])
    assert with_extra.exit_code == 0 and result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[:-1] == with_extra.output.strip().splitlines()  # the same plan, job by job
    assert lines[-1] == (
        "launcher joblib is not installed here, so its settings were not checked; to run the suite: "
        "pip install 'posenc[cluster]'"
    )
    assert not (tmp_path / "suites").exists()


def test_the_suite_itself_names_the_extra_before_any_work(tmp_path, monkeypatch):
    without_cluster_extra(monkeypatch)
    result = runner.invoke(app, ["suite", "--quick", "--only", "check", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2 and "needs the 'cluster' extra" in result.output
    assert not (tmp_path / "suites").exists()
