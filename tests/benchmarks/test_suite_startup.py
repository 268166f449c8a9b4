"""The suite start-up rows of ``posenc bench`` (benchmarks/suite.py ``suite_startup``)."""

import math
from dataclasses import replace

import pytest

from posenc.benchmarks.suite import CASES, SUITE_START_GOAL, Sizes, suite_startup


@pytest.mark.slow  # three dry runs in fresh processes: about 20 s
def test_suite_startup_times_a_dry_run_cold_after_a_code_edit_and_planned_before():
    rows = suite_startup(replace(Sizes.quick(), interval_rounds=1), threads=1)
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
        assert math.isnan(r["ratio_low"]) and math.isnan(r["ratio_high"])  # one round: no 95% interval
    assert CASES["suite"] is suite_startup
