"""Estimates over seeds as the report prints them: accuracies with an interval inside [0, 1] and the
method the module's docstring names, comparisons paired by seed, and n beside every interval."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from posenc.analysis.stats import bootstrap_interval, logit_t_interval, summarize, wilson_interval
from posenc.reporting.estimates import ACCURACY_GAP, Estimate, accuracy, difference, estimate, items, per_seed


def test_accuracy_takes_the_logit_t_interval_and_prints_n():
    e = Estimate.accuracy([0.9, 0.95, 0.7])
    ref = logit_t_interval([0.9, 0.95, 0.7])
    assert (e.mean, e.low, e.high, e.n) == pytest.approx((ref["mean"], ref["ci95_low"], ref["ci95_high"], 3))
    assert summarize([0.9, 0.95, 0.7])["ci95_high"] > 1 > e.high  # where the plain t interval left [0, 1]
    assert str(e) == f"0.85 [{e.low:.3g}, {e.high:.3g}] (n=3, items unknown)"


def test_accuracy_at_0_or_1_uses_the_items_or_else_the_bootstrap_over_seeds():
    with_items = Estimate.accuracy([1.0, 1.0, 0.9], trials=100)
    ref = logit_t_interval([1.0, 1.0, 0.9], 100)
    assert (with_items.low, with_items.high) == pytest.approx((ref["ci95_low"], ref["ci95_high"]))
    # seeds that agree exactly: the t interval has no width (and the empirical logit sits below 1),
    # the Wilson interval of the 384 pooled items keeps the mean inside and the test set's uncertainty
    every = Estimate.accuracy([1.0, 1.0, 1.0], trials=128)
    assert logit_t_interval([1.0] * 3, 128)["ci95_high"] < 1.0
    assert (every.mean, every.low, every.high) == pytest.approx((1.0, wilson_interval(384, 384)[0], 1.0))
    without = Estimate.accuracy([1.0, 1.0, 0.9])
    boot = bootstrap_interval([1.0, 1.0, 0.9])
    assert (without.low, without.high) == (boot["ci95_low"], boot["ci95_high"])
    assert 0.9 <= without.low <= without.high <= 1.0
    # the line says the items are unknown and the bootstrap stood in
    assert str(Estimate.accuracy([0.0, 0.0])) == "0 [0, 0] (n=2, items unknown: bootstrap over seeds)"


def test_one_seed_takes_the_wilson_interval_of_its_items_or_the_value_alone():
    one = Estimate.accuracy([0.75], trials=40)
    assert (one.low, one.high) == pytest.approx(wilson_interval(30, 40)) and one.n == 1
    assert str(Estimate.accuracy([0.75])) == "0.75 (n=1, items unknown)" and str(Estimate.accuracy([])) == "—"


def test_a_table_with_eval_items_reads_them():
    t = pd.DataFrame(
        {
            "pe": ["a"] * 3 + ["b"] * 3,
            "seed": [0, 1, 2] * 2,
            "resolution.eval_items": 128,
            "32px": [1.0, 0.96875, 0.9375, 0.5, 0.53125, 0.46875],
        }
    )
    assert items(t) == 128 and items(t.drop(columns="resolution.eval_items")) is None
    assert accuracy(t, "32px", pe="a") == Estimate.accuracy([1.0, 0.96875, 0.9375], 128)
    assert per_seed(t, "32px", pe="b") == {0: 0.5, 1: 0.53125, 2: 0.46875}


def test_differences_are_paired_by_seed_and_bounded_for_accuracies():
    t = pd.DataFrame({"seed": [0, 1, 2, 3], "a": [0.9, 0.5, 0.2, 0.7], "b": [0.1, 0.3, 0.1, math.nan]})
    d = difference(t, "a", "b", ACCURACY_GAP)
    diffs = [0.8, 0.2, 0.1]  # seed 3 has no b: left out
    ref = summarize(diffs)
    assert d.n == 3 and d.mean == pytest.approx(ref["mean"])
    # a − b on the base b (mean 1/6 over the paired seeds) lies in [−1/6, 5/6], not [−1, 1]
    assert ref["ci95_high"] > 1 and d.high == pytest.approx(5 / 6) and ref["ci95_low"] < -1 / 6
    assert d.low == pytest.approx(-1 / 6)
    assert d.verdict() == "no difference shown"
    assert Estimate.paired({0: 0.6, 1: 0.5, 2: 0.7}, {0: 0.5, 1: 0.45, 2: 0.6}).verdict() == "higher"
    assert Estimate.paired({0: 0.6}, {0: 0.5}).verdict() == "no difference shown"  # one seed shows nothing
    assert estimate(t, "a") == Estimate.of([0.9, 0.5, 0.2, 0.7])
