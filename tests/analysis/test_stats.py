"""Multi-seed statistics: the t quantile against SciPy and aggregation on a known table."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats as scipy_stats

from posenc.analysis.stats import aggregate, summarize, t_central, t_quantile


@pytest.mark.parametrize("dof", [1, 2, 3, 4, 5, 7, 10, 29, 30, 100, 1000])
def test_t_quantile_and_distribution_match_scipy(dof):
    assert t_quantile(0.95, dof) == pytest.approx(scipy_stats.t.ppf(0.975, dof), rel=1e-12)
    assert t_quantile(0.99, dof) == pytest.approx(scipy_stats.t.ppf(0.995, dof), rel=1e-12)
    for t in (0.1, 1.0, 2.5, 10.0):
        assert t_central(t, dof) == pytest.approx(1 - 2 * scipy_stats.t.sf(t, dof), abs=1e-13)


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    std = math.sqrt(5 / 3)  # squared deviations 2.25+0.25+0.25+2.25 over n-1=3
    half = 3.182446305284263 * std / 2  # t(0.975, 3) * std / sqrt(4)
    assert s == pytest.approx({"n": 4, "mean": 2.5, "std": std, "ci95_low": 2.5 - half, "ci95_high": 2.5 + half}, rel=1e-12)
    one = summarize([7.0])
    assert one["n"] == 1 and one["mean"] == 7.0 and math.isnan(one["std"]) and math.isnan(one["ci95_low"])
    assert summarize([])["n"] == 0


def test_aggregate_groups_runs_that_differ_by_seed_and_counts_failures():
    table = pd.DataFrame({
        "pe": ["rope", "rope", "rope", "nope", "nope", "nope"],
        "seed": [0, 1, 2, 0, 1, 2],
        "status": ["completed", "completed", "completed", "completed", "completed", "failed"],
        "val_loss": [2.0, 2.2, 2.4, 3.0, 3.5, float("nan")],
    })
    out = aggregate(table, ["pe"], ["val_loss"]).set_index("pe")
    low, high = scipy_stats.t.interval(0.95, 2, loc=2.2, scale=0.2 / math.sqrt(3))
    assert out.loc["rope", ["n", "failed"]].tolist() == [3, 0]
    assert out.loc["rope", ["mean", "std", "ci95_low", "ci95_high"]].tolist() == pytest.approx([2.2, 0.2, low, high], rel=1e-12)
    low, high = scipy_stats.t.interval(0.95, 1, loc=3.25, scale=math.sqrt(0.125) / math.sqrt(2))
    assert out.loc["nope", ["n", "failed"]].tolist() == [2, 1]
    assert out.loc["nope", ["mean", "ci95_low", "ci95_high"]].tolist() == pytest.approx([3.25, low, high], rel=1e-12)
