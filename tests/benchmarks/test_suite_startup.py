"""The suite start-up rows of ``posenc bench`` (benchmarks/suite.py ``suite_startup``)."""

import pytest

from posenc.benchmarks.suite import CASES, SUITE_START_GOAL, Sizes, suite_startup


@pytest.mark.slow  # four dry runs in fresh processes: about 25 s
def test_suite_startup_times_a_dry_run_cold_after_a_code_edit_and_planned_before():
    rows = suite_startup(Sizes.quick(), threads=1)
    plan = "posenc suite --suite standard --only extrapolation_target --dry-run"
    assert [r["case"] for r in rows] == [
        f"{plan}: nothing kept",
        f"{plan}: compositions kept, every job checked",
        f"{plan}: planned before",
    ]
    for r in rows:
        assert r["benchmark"] == "suite start-up" and r["unit"] == "s" and r["goal"] == "< 10 s"
        assert 0.1 < r["posenc"] == r["ratio"] < 300  # seconds: the reference is 1 s
        assert r["met"] == (r["posenc"] <= SUITE_START_GOAL)
    assert CASES["suite"] is suite_startup
