"""Multi-seed statistics: the t quantile against SciPy and aggregation on a known table."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats as scipy_stats

from posenc.analysis.stats import aggregate, bootstrap_interval, median_interval, summarize, t_central, t_quantile

# SciPy's t quantiles moved by up to 2e-9 (relative) between 1.11, the test extra's floor, and
# 1.17; posenc's are checked to 1e-12 against the closed forms below.
SCIPY_REL = 1e-8


@pytest.mark.parametrize("dof", [1, 2, 3, 4, 5, 7, 10, 29, 30, 100, 1000])
def test_t_quantile_and_distribution_match_scipy(dof):
    assert t_quantile(0.95, dof) == pytest.approx(scipy_stats.t.ppf(0.975, dof), rel=SCIPY_REL)
    assert t_quantile(0.99, dof) == pytest.approx(scipy_stats.t.ppf(0.995, dof), rel=SCIPY_REL)
    for t in (0.1, 1.0, 2.5, 10.0):
        assert t_central(t, dof) == pytest.approx(1 - 2 * scipy_stats.t.sf(t, dof), abs=1e-13)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_t_quantile_equals_the_closed_forms_at_one_and_two_degrees_of_freedom(level):
    q = (1 + level) / 2  # the two-sided level's upper quantile
    assert t_quantile(level, 1) == pytest.approx(math.tan(math.pi * (q - 0.5)), rel=1e-12)  # Cauchy
    assert t_quantile(level, 2) == pytest.approx((2 * q - 1) / math.sqrt(2 * q * (1 - q)), rel=1e-12)


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    std = math.sqrt(5 / 3)  # squared deviations 2.25+0.25+0.25+2.25 over n-1=3
    half = 3.182446305284263 * std / 2  # t(0.975, 3) * std / sqrt(4)
    assert s == pytest.approx(
        {"n": 4, "mean": 2.5, "std": std, "ci95_low": 2.5 - half, "ci95_high": 2.5 + half}, rel=1e-12
    )
    one = summarize([7.0])
    assert one["n"] == 1 and one["mean"] == 7.0 and math.isnan(one["std"]) and math.isnan(one["ci95_low"])
    assert summarize([])["n"] == 0


def test_aggregate_groups_runs_that_differ_by_seed_and_counts_failures():
    table = pd.DataFrame(
        {
            "pe": ["rope", "rope", "rope", "nope", "nope", "nope"],
            "seed": [0, 1, 2, 0, 1, 2],
            "status": ["completed", "completed", "completed", "completed", "completed", "failed"],
            "val_loss": [2.0, 2.2, 2.4, 3.0, 3.5, float("nan")],
        }
    )
    out = aggregate(table, ["pe"], ["val_loss"]).set_index("pe")
    low, high = scipy_stats.t.interval(0.95, 2, loc=2.2, scale=0.2 / math.sqrt(3))
    assert out.loc["rope", ["n", "failed"]].tolist() == [3, 0]
    assert out.loc["rope", ["mean", "std", "ci95_low", "ci95_high"]].tolist() == pytest.approx(
        [2.2, 0.2, low, high], rel=SCIPY_REL
    )
    low, high = scipy_stats.t.interval(0.95, 1, loc=3.25, scale=math.sqrt(0.125) / math.sqrt(2))
    assert out.loc["nope", ["n", "failed"]].tolist() == [2, 1]
    assert out.loc["nope", ["mean", "ci95_low", "ci95_high"]].tolist() == pytest.approx(
        [3.25, low, high], rel=SCIPY_REL
    )


# --- bounded intervals for accuracies, paired differences ---------------------------------------

from posenc.analysis.stats import (  # noqa: E402
    aggregate_accuracy,
    logit_t_interval,
    paired_by_seed,
    paired_difference,
    pooled_wilson,
    verdict,
    wilson_interval,
)


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (7, 20), (20, 20), (481, 512), (3, 1000)])
@pytest.mark.parametrize("level", [0.95, 0.99])
def test_wilson_matches_scipy(k, n, level):
    ref = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    assert wilson_interval(k, n, level) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_pooled_wilson_pools_the_trials_of_every_seed():
    out = pooled_wilson([0.5, 0.75, 1.0], [4, 8, 2])  # 2 + 6 + 2 = 10 of 14
    ref = scipy_stats.binomtest(10, 14).proportion_ci(method="wilson")
    assert out == pytest.approx({"n": 3, "trials": 14, "mean": 10 / 14, "ci95_low": ref.low, "ci95_high": ref.high})
    assert pooled_wilson([float("nan"), 1.0], [3, 5])["trials"] == 5  # a missing seed takes its trials with it


def test_logit_t_interval_is_scipys_t_interval_on_the_logit_scale_and_stays_in_bounds():
    """The issue's case: a plain t interval on these accuracies runs past 1 ("0.921 [0.596, 1.25]")."""
    accs = [0.99, 0.97, 0.80]
    plain = summarize(accs)
    assert plain["ci95_high"] > 1
    logits = [math.log(p / (1 - p)) for p in accs]
    mean, sem = sum(logits) / 3, scipy_stats.sem(logits)
    low, high = scipy_stats.t.interval(0.95, 2, loc=mean, scale=sem)
    out = logit_t_interval(accs)
    assert out == pytest.approx(
        {
            "n": 3,
            "mean": sum(accs) / 3,
            "ci95_low": scipy_stats.logistic.cdf(low),
            "ci95_high": scipy_stats.logistic.cdf(high),
        },
        rel=SCIPY_REL,
    )
    assert 0 < out["ci95_low"] < out["mean"] < out["ci95_high"] < 1


def test_logit_t_interval_with_trials_uses_the_empirical_logit_so_0_and_1_stay_finite():
    accs, n = [1.0, 0.95, 0.0], 20
    logits = [math.log((p * n + 0.5) / (n - p * n + 0.5)) for p in accs]
    low, high = scipy_stats.t.interval(0.95, 2, loc=sum(logits) / 3, scale=scipy_stats.sem(logits))
    out = logit_t_interval(accs, trials=n)
    assert (out["ci95_low"], out["ci95_high"]) == pytest.approx(tuple(scipy_stats.logistic.cdf([low, high])))
    assert 0 <= out["ci95_low"] and out["ci95_high"] <= 1
    with pytest.raises(ValueError, match="exactly 0 or 1 has no logit; pass trials"):
        logit_t_interval(accs)
    with pytest.raises(ValueError, match="must lie in \\[0, 1\\]"):
        logit_t_interval([0.5, 1.2])
    one = logit_t_interval([0.7])
    assert one["n"] == 1 and math.isnan(one["ci95_low"])


def test_paired_difference_matches_scipys_paired_t_interval():
    a = {0: 0.81, 1: 0.77, 2: 0.90, 3: 0.85, 4: 0.79}
    b = {0: 0.70, 1: 0.74, 2: 0.81, 3: 0.80, 4: 0.69, 9: 0.5}  # seed 9 has no partner
    ref = scipy_stats.ttest_rel([a[s] for s in range(5)], [b[s] for s in range(5)]).confidence_interval(0.95)
    out = paired_difference(a, b)
    diffs = [a[s] - b[s] for s in range(5)]
    assert out == pytest.approx(
        {
            "n": 5,
            "mean_diff": sum(diffs) / 5,
            "std": scipy_stats.tstd(diffs),
            "ci95_low": ref.low,
            "ci95_high": ref.high,
            "unpaired": 1,
        },
        rel=SCIPY_REL,
    )
    assert verdict(out) == "higher" and verdict(paired_difference(b, a)) == "lower"


def test_pairing_by_seed_is_narrower_than_comparing_means_when_seeds_move_together():
    """Seed effects shared by both arms cancel in the paired differences."""
    a = {s: 0.5 + 0.1 * s + 0.02 for s in range(4)}
    b = {s: 0.5 + 0.1 * s + (0.0 if s % 2 else 0.005) for s in range(4)}
    out = paired_difference(a, b)
    assert verdict(out) == "higher" and out["ci95_high"] - out["ci95_low"] < 0.05
    unpaired_low = summarize(list(a.values()))["ci95_low"]
    assert unpaired_low < summarize(list(b.values()))["ci95_high"]  # the seed-mean intervals overlap


def test_paired_by_seed_reads_a_table_and_bounds_clip_the_interval():
    table = pd.DataFrame({"pe": ["rope"] * 2 + ["alibi"] * 2, "seed": [0, 1, 0, 1], "accuracy": [0.9, 0.3, 0.1, 0.2]})
    out = paired_by_seed(table, "pe", "rope", "alibi", "accuracy", bounds=(-1.0, 1.0))
    raw = paired_difference({0: 0.9, 1: 0.3}, {0: 0.1, 1: 0.2})
    assert out["n"] == 2 and out["mean_diff"] == pytest.approx(0.45)
    assert raw["ci95_high"] > 1 and raw["ci95_low"] < -1 and (out["ci95_low"], out["ci95_high"]) == (-1.0, 1.0)
    assert verdict(out) == "no difference shown"
    with pytest.raises(ValueError, match="pe='rope' has several rows for one seed"):
        paired_by_seed(pd.concat([table, table]), "pe", "rope", "alibi", "accuracy")
    assert verdict(paired_difference({0: 1.0}, {0: 0.0})) == "no difference shown"  # one seed: no interval


def test_aggregate_accuracy_carries_seeds_and_both_bounded_intervals():
    table = pd.DataFrame(
        {
            "pe": ["rope"] * 3 + ["nope"] * 3,
            "seed": [0, 1, 2] * 2,
            "status": ["completed"] * 5 + ["failed"],
            "items": [100, 100, 50, 100, 100, 100],
            "accuracy": [0.99, 0.97, 0.80, 0.5, 0.6, float("nan")],
        }
    )
    out = aggregate_accuracy(table, ["pe"], trials="items").set_index("pe")
    rope = logit_t_interval([0.99, 0.97, 0.80], [100, 100, 50])
    wilson = pooled_wilson([0.99, 0.97, 0.80], [100, 100, 50])
    assert out.loc["rope", ["n", "trials", "failed"]].tolist() == [3, 250, 0]
    assert out.loc["rope", ["mean", "ci95_low", "ci95_high", "wilson_low", "wilson_high"]].tolist() == pytest.approx(
        [rope["mean"], rope["ci95_low"], rope["ci95_high"], wilson["ci95_low"], wilson["ci95_high"]]
    )
    assert out.loc["nope", ["n", "trials", "failed"]].tolist() == [2, 200, 1]
    assert (
        (
            (out[["ci95_low", "ci95_high", "wilson_low", "wilson_high"]] >= 0)
            & (out[["ci95_low", "ci95_high", "wilson_low", "wilson_high"]] <= 1)
        )
        .all()
        .all()
    )
    no_trials = aggregate_accuracy(table, ["pe"]).set_index("pe")
    assert math.isnan(no_trials.loc["rope", "wilson_low"]) and no_trials.loc["rope", "n"] == 3


def test_bootstrap_interval_is_the_percentiles_of_the_resampled_means():
    """Two seeds at 0 and 1: resampled means 0, ½, 1 with chances ¼, ½, ¼, so the 95% interval is
    [0, 1]; three seeds 0.2, 0.4, 0.6: the mean 0.2 has chance 1/27 > 2.5%, so the lower bound is 0.2."""
    two = bootstrap_interval([0.0, 1.0])
    assert (two["n"], two["mean"], two["ci95_low"], two["ci95_high"]) == (2, 0.5, 0.0, 1.0)
    three = bootstrap_interval([0.2, 0.4, 0.6])
    assert three["ci95_low"] == pytest.approx(0.2) and three["ci95_high"] == pytest.approx(0.6)
    narrow = bootstrap_interval([0.9, 1.0, 1.0, 1.0, 1.0], level=0.5)
    assert 0.9 < narrow["ci95_low"] <= 0.98 <= narrow["ci95_high"] <= 1.0
    assert bootstrap_interval([0.9, 1.0, 1.0]) == bootstrap_interval([0.9, 1.0, 1.0])  # a fixed generator
    assert math.isnan(bootstrap_interval([1.0])["ci95_low"]) and bootstrap_interval([])["n"] == 0


def test_median_interval_takes_the_order_statistics_of_binomial_coverage():
    """15 values: P(4 <= B <= 11) = 1 - 2·576/2^15 = 96.5% >= 95% but P(5 <= B <= 10) = 88.2%, so the
    4th and 12th smallest; 6 values: the extremes (96.9%); 5 values: even the extremes cover only
    93.75%, so no interval."""
    values = [float(v) for v in (9, 3, 14, 1, 7, 12, 5, 15, 2, 11, 8, 4, 13, 6, 10)]
    assert median_interval(values) == (4.0, 12.0)
    low = sum(math.comb(15, i) for i in range(4, 12)) / 2**15
    assert low == pytest.approx(1 - scipy_stats.binom.cdf(3, 15, 0.5) * 2) and low >= 0.95
    assert median_interval([0.9, 0.8, 1.1, 1.0, 0.95, 0.85]) == (0.8, 1.1)
    assert all(math.isnan(x) for x in median_interval([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert median_interval(values, level=0.5)[0] > 4.0  # a lower level, a narrower interval


# --- tests, multiplicity and power ---------------------------------------------------------------

from posenc.analysis.stats import (  # noqa: E402
    accuracy_gap_bounds,
    benjamini_hochberg,
    holm,
    mcnemar_exact,
    mcnemar_pairs,
    minimum_detectable_effect,
    outside_margin,
    paired_t_test,
    t_cdf,
    tost,
)

P_VALUES = [0.01, 0.04, 0.03, 0.005, float("nan")]  # a NaN (one seed) is no test and not counted


def test_holm_on_a_known_set_of_p_values():
    """Sorted 0.005, 0.01, 0.03, 0.04 of m = 4: 4·0.005 = 0.02; 3·0.01 = 0.03; 2·0.03 = 0.06;
    1·0.04 = 0.04, raised to the running maximum 0.06; back in the input's order."""
    adjusted = holm(P_VALUES)
    assert adjusted[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15) and math.isnan(adjusted[4])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    # the review's NoPE family: smallest p 0.0086 of 8 tests, 8·0.0086 = 0.069 > 0.05, not significant
    assert min(holm([0.0086, 0.039, 0.06, 0.069, 0.11, 0.3, 0.44, 0.82])) == pytest.approx(8 * 0.0086)


@pytest.mark.parametrize("only_a, only_b", [(0, 0), (0, 1), (0, 5), (5, 0), (3, 9), (9, 3), (7, 7), (1, 19), (12, 30)])
def test_mcnemar_exact_is_the_two_sided_binomial_test_of_the_discordant_pairs(only_a, only_b):
    """SciPy's exact binomial test at ½ on the discordant trials (no disagreement: p = 1)."""
    n = only_a + only_b
    expected = 1.0 if n == 0 else scipy_stats.binomtest(only_a, n, 0.5).pvalue
    assert mcnemar_exact(only_a, only_b) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_exact_known_values_and_bad_counts():
    """0 against 5: 2·(½)⁵ = 1/16; 1 against 19: 2·21/2²⁰."""
    assert mcnemar_exact(0, 5) == 1 / 16
    assert mcnemar_exact(1, 19) == pytest.approx(2 * 21 / 2**20, rel=1e-15)
    with pytest.raises(ValueError, match="counts >= 0"):
        mcnemar_exact(-1, 3)


def _trials(outcomes: dict[str, str], length: int) -> pd.DataFrame:
    """One row per (arm, trial) from each arm's string of pass ("1") and fail ("0") trials."""
    return pd.DataFrame(
        {"length": length, "method": arm, "trial": t, "found": c == "1"}
        for arm, row in outcomes.items()
        for t, c in enumerate(row)
    )


def test_mcnemar_pairs_counts_discordant_trials_and_corrects_over_the_table():
    """At 1k, none passes trials 0-1 and yarn trials 0-7 (6 only yarn, p = 2/64), se the same as
    none; at 2k they never disagree. Every pair of the three arms at 1k, and at 2k: six tests, Holm
    over all six, so yarn's p = 1/32 becomes 6/32 and no pair reads higher."""
    trials = pd.concat(
        [
            _trials({"none": "1100000000", "yarn": "1111111100", "se": "1100000000"}, 1024),
            _trials({"none": "1010101010", "yarn": "1010101010", "se": "1010101010"}, 2048),
        ]
    ).sample(frac=1, random_state=0)  # order does not matter: trials pair by their key
    table = mcnemar_pairs(trials, arm="method", trial="trial", passed="found", group="length")
    assert list(table.columns[:3]) == ["length", "a", "b"] and len(table) == 6
    row = table[(table.length == 1024) & (table.a == "none") & (table.b == "yarn")].iloc[0]
    assert (row["trials"], row["a found"], row["b found"], row["only a"], row["only b"]) == (10, 2, 8, 0, 6)
    assert row["p (McNemar)"] == 2 / 64 and row["p (Holm)"] == pytest.approx(6 * 2 / 64)
    assert set(table.reading) == {"no difference shown"}
    assert table[table.length == 2048]["p (McNemar)"].tolist() == [1.0, 1.0, 1.0]


def test_mcnemar_pairs_against_a_baseline_reads_the_higher_arm():
    """Each arm against none only; 0 against 12 discordant trials, p = 2/4096 < 0.05 after Holm
    over two tests: "yarn higher"; a trial key of two columns (depth, trial)."""
    trials = _trials({"none": "0" * 12 + "11", "yarn": "1" * 14, "pi": "0" * 12 + "11"}, 4096)
    trials["depth"], trials["trial"] = trials.trial % 2, trials.trial // 2
    table = mcnemar_pairs(
        trials, arm="method", trial=["depth", "trial"], passed="found", group="length", baseline="none"
    )
    assert table[["a", "b"]].values.tolist() == [["none", "pi"], ["none", "yarn"]]
    assert table.reading.tolist() == ["no difference shown", "yarn higher"]
    assert table["p (Holm)"].iloc[1] == pytest.approx(2 * 2 / 2**12)
    alone = mcnemar_pairs(trials[trials.method == "none"], arm="method", trial=["depth", "trial"], passed="found")
    assert alone.empty and list(alone.columns[-3:]) == ["p (McNemar)", "p (Holm)", "reading"]  # one arm: no pair
    with pytest.raises(ValueError, match="baseline 'ntk' is not an arm"):
        mcnemar_pairs(trials, arm="method", trial=["depth", "trial"], passed="found", baseline="ntk")


def test_benjamini_hochberg_on_a_known_set_of_p_values_and_against_scipy():
    """m·p/rank: 0.005·4/1 = 0.02, 0.01·4/2 = 0.02, 0.03·4/3 = 0.04, 0.04·4/4 = 0.04 (running minimum
    from the largest)."""
    adjusted = benjamini_hochberg(P_VALUES)
    assert adjusted[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02], abs=1e-15) and math.isnan(adjusted[4])
    ps = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    assert benjamini_hochberg(ps) == pytest.approx(list(scipy_stats.false_discovery_control(ps)), rel=1e-12)


def test_t_cdf_and_the_paired_t_test_match_scipy():
    for dof in (1, 2, 4, 9):
        for t in (-3.0, -0.5, 0.0, 0.7, 2.5):
            assert t_cdf(t, dof) == pytest.approx(scipy_stats.t.cdf(t, dof), abs=1e-13)
    assert t_cdf(math.inf, 3) == 1.0 and t_cdf(-math.inf, 3) == 0.0
    d = [0.1, 0.2, 0.15, 0.05, 0.3]
    assert paired_t_test(d) == pytest.approx(scipy_stats.ttest_1samp(d, 0).pvalue, rel=1e-10)
    # seeds that agree exactly: a nonzero difference is certain, a zero one is no evidence
    assert paired_t_test([0.2, 0.2, 0.2]) == 0.0 and paired_t_test([0.0, 0.0]) == 1.0
    assert math.isnan(paired_t_test([0.3]))


def test_tost_shows_a_pair_known_equivalent_and_not_a_pair_known_different():
    """Equivalent: differences 0.001 ± 0.005 within ±0.02; the larger one-sided p is that against
    +0.02, t = (0.0012 − 0.02)/se. Different: differences around 0.1, far outside ±0.02."""
    equal = [0.004, -0.003, 0.001, 0.006, -0.002]
    p = tost(equal, 0.02)
    upper = scipy_stats.ttest_1samp(equal, 0.02, alternative="less").pvalue
    lower = scipy_stats.ttest_1samp(equal, -0.02, alternative="greater").pvalue
    assert p == pytest.approx(max(upper, lower), rel=1e-10) and p < 1e-3
    assert p == pytest.approx(scipy_stats.t.cdf((0.0012 - 0.02) / scipy_stats.sem(equal), 4), rel=1e-10)
    different = [0.09, 0.11, 0.1, 0.12, 0.08]
    assert tost(different, 0.02) > 0.99  # not equivalent
    # and the difference is shown beyond the margin: twice the one-sided p against +0.02
    beyond = 2 * scipy_stats.ttest_1samp(different, 0.02, alternative="greater").pvalue
    assert outside_margin(different, 0.02) == pytest.approx(beyond, rel=1e-10) and beyond < 1e-3
    assert outside_margin(equal, 0.02) == 1.0
    with pytest.raises(ValueError, match="margin must be > 0"):
        tost(equal, 0.0)


def test_minimum_detectable_effect_is_the_t_quantile_sum_times_the_standard_error():
    """n = 5 seeds, sd 0.1, α = 0.05/8 (Holm's first step of 8 tests), power 0.8:
    (t(1 − α/2, 4) + t(0.8, 4))·0.1/√5."""
    alpha = 0.05 / 8
    expected = (scipy_stats.t.ppf(1 - alpha / 2, 4) + scipy_stats.t.ppf(0.8, 4)) * 0.1 / math.sqrt(5)
    assert minimum_detectable_effect(0.1, 5, alpha) == pytest.approx(expected, rel=1e-10)
    one = (scipy_stats.t.ppf(1 - alpha, 4) + scipy_stats.t.ppf(0.8, 4)) * 0.1 / math.sqrt(5)
    assert minimum_detectable_effect(0.1, 5, alpha, kind="one-sided") == pytest.approx(one, rel=1e-10)
    equivalence = (scipy_stats.t.ppf(1 - alpha, 4) + scipy_stats.t.ppf(0.9, 4)) * 0.1 / math.sqrt(5)
    assert minimum_detectable_effect(0.1, 5, alpha, kind="equivalence") == pytest.approx(equivalence, rel=1e-10)
    assert math.isnan(minimum_detectable_effect(0.1, 1))
    # with more seeds it shrinks: 20 seeds detect less than half of what 5 detect
    assert minimum_detectable_effect(0.1, 20, alpha) < minimum_detectable_effect(0.1, 5, alpha) / 2


def test_a_difference_of_accuracies_is_bounded_by_its_base():
    """The review's case: a gain on a 0.998 base can be at most 0.002, a loss at most 0.998."""
    assert accuracy_gap_bounds([0.998, 0.998]) == pytest.approx((-0.998, 0.002))
    assert accuracy_gap_bounds([]) == (-1.0, 1.0)
    out = paired_difference({0: 1.0, 1: 0.995, 2: 1.0}, {0: 0.998, 1: 0.998, 2: 0.998}, bounds=(-0.998, 0.002))
    assert out["ci95_high"] == pytest.approx(0.002) and out["ci95_low"] < 0
