"""Multi-seed statistics: mean, standard deviation, n and a 95% Student-t confidence interval.

The t quantile comes from the closed form of the t distribution function for integer degrees
of freedom (Abramowitz & Stegun 26.7.3-4), inverted by bisection, so no SciPy is needed; the
tests check it against ``scipy.stats.t``.

Accuracies are bounded, so a plain t interval can leave [0, 1] ("0.921 [0.596, 1.25]"). Two
bounded intervals, each carrying the number of seeds ``n``:

* ``logit_t_interval`` — the t interval over seeds on the logit scale, mapped back with the
  logistic function. It keeps the seed-to-seed spread, the larger source of variance when
  models are retrained, so it is the one to read when comparing schemes over several seeds.
* ``wilson_interval`` / ``pooled_wilson`` — the Wilson score interval on the trials pooled over
  seeds (Wilson 1927). It sees only the sampling of evaluation items, so it is narrower than
  the spread between retrained models; it is the interval of one seed (where t has none).

Where a seed's accuracy is exactly 0 or 1 and the number of evaluation items is not known, the
logit has no value; ``bootstrap_interval`` (the percentile bootstrap of the mean over seeds, which
never leaves the range of the seeds' values) stands in.

Comparisons are paired by seed (``paired_difference``): the t interval of the per-seed
differences a − b. Decisions are tests with p-values (``paired_t_test``; ``tost`` for equivalence
within a margin, Schuirmann 1987), corrected within a family of tests (``holm``, Holm 1979;
``benjamini_hochberg``, Benjamini & Hochberg 1995), each with the smallest effect it could detect
at its n (``minimum_detectable_effect``). Pass/fail trials that two arms share (the same prompts
under two methods) are compared by ``mcnemar_exact``, a table of arms by ``mcnemar_pairs``.
``accuracy_gap_bounds`` is the range a difference of two accuracies can take given its base.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from statistics import NormalDist

import pandas as pd


def t_central(t: float, dof: int) -> float:
    """P(|T| <= t) for Student's t with ``dof`` degrees of freedom (A&S 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(dof))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if dof % 2 == 1:  # θ + sinθ·(cosθ + 2/3 cos³θ + 2·4/(3·5) cos⁵θ + …), up to cos^(dof-2)
        term, total = math.cos(theta), 0.0
        for k in range(1, (dof - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + s * total) if dof > 1 else 2 / math.pi * theta
    term, total = 1.0, 0.0  # sinθ·(1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + …), up to cos^(dof-2)
    for k in range(1, dof // 2 + 1):
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return s * total


def t_quantile(level: float, dof: int) -> float:
    """The t such that P(|T| <= t) = ``level`` (1.96 for level 0.95 as dof → ∞)."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {dof}")
    lo, hi = 0.0, 1.0
    while t_central(hi, dof) < level:
        hi *= 2
    for _ in range(200):  # bisection to float precision
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if t_central(mid, dof) < level else (lo, mid)
    return (lo + hi) / 2


def summarize(values: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """mean, std (n − 1 in the denominator), n, and the ``level`` t interval of the mean.

    With one value the std and interval are NaN: one seed says nothing about the spread.
    """
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    n = len(xs)
    nan = float("nan")
    if n == 0:
        return {"n": 0, "mean": nan, "std": nan, "ci95_low": nan, "ci95_high": nan}
    mean = sum(xs) / n
    if n == 1:
        return {"n": 1, "mean": mean, "std": nan, "ci95_low": nan, "ci95_high": nan}
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(level, n - 1) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "std": std, "ci95_low": mean - half, "ci95_high": mean + half}


def _groups(table: pd.DataFrame, keys: Sequence[str], status: str | None):
    """(group values by key, the group's completed rows, how many of its rows failed) per group."""
    grouped = table.groupby(list(keys), dropna=False, sort=False) if keys else [((), table)]
    for group, part in grouped:
        group = group if isinstance(group, tuple) else (group,)
        ok = part if status is None or status not in part else part[part[status] == "completed"]
        yield dict(zip(keys, group)), ok, len(part) - len(ok)


def aggregate(
    table: pd.DataFrame, keys: Sequence[str], metrics: Sequence[str], status: str | None = "status"
) -> pd.DataFrame:
    """One row per group of ``keys`` and metric: n, mean, std, 95% interval, and how many of
    the group's rows failed (``status`` column other than ``completed``; they are not averaged)."""
    keys = list(keys)
    rows = []
    for group, ok, failed in _groups(table, keys, status):
        for metric in metrics:
            values = ok[metric].tolist() if metric in ok else []
            rows.append({**group, "metric": metric, **summarize(values), "failed": failed})
    return pd.DataFrame(rows, columns=[*keys, "metric", "n", "mean", "std", "ci95_low", "ci95_high", "failed"])


def _accuracies(
    accuracies: Sequence[float | None], trials: int | Sequence[int] | None
) -> tuple[list[float], list[int] | None]:
    """The accuracies that are not missing (None, NaN), each in [0, 1], with their items per seed
    (``trials``: one number for every seed, or one per seed; None stays None)."""
    values = [float("nan") if v is None else float(v) for v in accuracies]
    counts = None
    if trials is not None:
        counts = [int(trials)] * len(values) if isinstance(trials, (int, float)) else [int(t) for t in trials]
        if len(counts) != len(values):
            raise ValueError(f"{len(values)} accuracies but {len(counts)} trial counts")
        if any(t < 1 for t in counts):
            raise ValueError(f"trial counts must be >= 1, got {counts}")
    keep = [i for i, v in enumerate(values) if not math.isnan(v)]
    ps = [values[i] for i in keep]
    if any(not 0 <= p <= 1 for p in ps):
        raise ValueError(f"accuracies must lie in [0, 1], got {ps}")
    return ps, None if counts is None else [counts[i] for i in keep]


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def logistic(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def logit_t_interval(
    accuracies: Sequence[float], trials: int | Sequence[int] | None = None, level: float = 0.95
) -> dict[str, float]:
    """n (seeds), mean accuracy, and the ``level`` t interval of the mean logit mapped back to (0, 1).

    With ``trials`` (evaluation items per seed: one number, or one per seed) an accuracy p of n
    items enters as the empirical logit log((k + ½) / (n − k + ½)), k = p·n (Haldane–Anscombe),
    so a seed at 0 or 1 stays finite; without it, every accuracy must lie strictly between 0 and
    1. ``mean`` is the plain mean of the accuracies; the interval is for the logistic of the mean
    logit. With one seed the interval is NaN.
    """
    ps, counts = _accuracies(accuracies, trials)
    n, nan = len(ps), float("nan")
    if counts is not None:
        xs = [math.log((p * t + 0.5) / (t - p * t + 0.5)) for p, t in zip(ps, counts)]
    elif any(p in (0.0, 1.0) for p in ps):
        raise ValueError("an accuracy of exactly 0 or 1 has no logit; pass trials (items per seed)")
    else:
        xs = [logit(p) for p in ps]
    out = {"n": n, "mean": sum(ps) / n if n else nan, "ci95_low": nan, "ci95_high": nan}
    if n >= 2:
        t = summarize(xs, level)
        out.update(ci95_low=logistic(t["ci95_low"]), ci95_high=logistic(t["ci95_high"]))
    return out


def bootstrap_interval(
    values: Sequence[float], level: float = 0.95, resamples: int = 4000, seed: int = 0
) -> dict[str, float]:
    """n, mean, and the ``level`` percentile bootstrap interval of the mean over ``values`` (seeds
    resampled with replacement, ``resamples`` times from a fixed generator, so the same values give
    the same interval). It stays inside [min, max] of the values. With one value the interval is NaN."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    n, nan = len(xs), float("nan")
    out = {"n": n, "mean": sum(xs) / n if n else nan, "ci95_low": nan, "ci95_high": nan}
    if n >= 2:
        rng = random.Random(seed)
        means = sorted(sum(rng.choices(xs, k=n)) / n for _ in range(resamples))
        tail = (1 - level) / 2
        out.update(
            ci95_low=means[int(tail * (resamples - 1))], ci95_high=means[math.ceil((1 - tail) * (resamples - 1))]
        )
    return out


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The distribution-free ``level`` interval of the median: order statistics x_(k) and
    x_(n+1−k), k the largest rank with P(k ≤ B ≤ n − k) ≥ ``level`` for B ~ Binomial(n, ½).
    Its coverage is at least ``level`` whatever the distribution (15 values: the 4th and 12th,
    96.5%); with fewer than 6 values no pair reaches 95% and it is NaN."""
    xs = sorted(float(v) for v in values if v is not None and not math.isnan(float(v)))
    n = len(xs)
    covered = [k for k in range(1, n // 2 + 1) if sum(math.comb(n, i) for i in range(k, n - k + 1)) >= level * 2**n]
    return (xs[covered[-1] - 1], xs[n - covered[-1]]) if covered else (float("nan"), float("nan"))


def wilson_interval(successes: float, trials: float, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / trials``; always inside [0, 1]."""
    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials > 0, got {successes} of {trials}")
    z = NormalDist().inv_cdf((1 + level) / 2)
    p, z2 = successes / trials, z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z / (1 + z2 / trials) * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def pooled_wilson(accuracies: Sequence[float], trials: int | Sequence[int], level: float = 0.95) -> dict[str, float]:
    """n (seeds), pooled accuracy Σk / Σtrials and its Wilson interval, from per-seed accuracies
    and items per seed (one number for all seeds, or one per seed)."""
    ps, counts = _accuracies(accuracies, trials)
    nan = float("nan")
    if not ps:
        return {"n": 0, "trials": 0, "mean": nan, "ci95_low": nan, "ci95_high": nan}
    k, total = sum(round(p * t) for p, t in zip(ps, counts)), sum(counts)
    low, high = wilson_interval(k, total, level)
    return {"n": len(ps), "trials": total, "mean": k / total, "ci95_low": low, "ci95_high": high}


def paired_difference(
    a: Mapping[int, float], b: Mapping[int, float], level: float = 0.95, bounds: tuple[float, float] | None = None
) -> dict[str, float]:
    """Per-seed values of two arms ({seed: value}) -> n (seeds in both), the mean of a − b over
    those seeds, its std, the ``level`` t interval of the paired differences, and how many seeds
    only one arm has, or where either is missing (``unpaired``; they are left out).

    ``bounds`` clips the interval to the range a difference can take ((−1, 1) for accuracies).
    """
    seeds = [s for s in a if s in b and not math.isnan(float(a[s])) and not math.isnan(float(b[s]))]
    diffs = [float(a[s]) - float(b[s]) for s in seeds]
    unpaired = len(set(a) | set(b)) - len(seeds)
    out = summarize(diffs, level)
    low, high = out["ci95_low"], out["ci95_high"]
    if bounds is not None and out["n"] >= 2:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return {
        "n": out["n"],
        "mean_diff": out["mean"],
        "std": out["std"],
        "ci95_low": low,
        "ci95_high": high,
        "unpaired": unpaired,
    }


def paired_by_seed(
    table: pd.DataFrame,
    column: str,
    a: object,
    b: object,
    metric: str,
    seed: str = "seed",
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> dict[str, float]:
    """``paired_difference`` of ``metric`` between the rows where ``column`` is ``a`` and where it
    is ``b`` (filter the table to one length, task… first). Each arm has one row per seed."""
    arms = []
    for value in (a, b):
        rows = table[table[column] == value]
        if rows[seed].duplicated().any():
            raise ValueError(f"{column}={value!r} has several rows for one {seed}; filter the table to one per seed")
        arms.append(dict(zip(rows[seed], rows[metric])))
    return paired_difference(arms[0], arms[1], level, bounds)


def verdict(difference: Mapping[str, float]) -> str:
    """``higher`` or ``lower`` when the paired interval of a − b excludes 0, else ``no difference
    shown`` (also with fewer than two paired seeds)."""
    low, high = difference["ci95_low"], difference["ci95_high"]
    if math.isnan(low) or math.isnan(high):
        return "no difference shown"
    return "higher" if low > 0 else "lower" if high < 0 else "no difference shown"


def aggregate_accuracy(
    table: pd.DataFrame,
    keys: Sequence[str],
    metric: str = "accuracy",
    trials: int | str | None = None,
    status: str | None = "status",
) -> pd.DataFrame:
    """One row per group of ``keys``: n (seeds), mean accuracy, the logit-scale t interval
    (``ci95_low``/``ci95_high``), the pooled Wilson interval (``wilson_low``/``wilson_high``,
    NaN without ``trials``) and failed rows. ``trials`` is the items per seed: a number, or the
    name of a column holding it."""
    keys = list(keys)
    rows = []
    for group, ok, failed in _groups(table, keys, status):
        part = ok[ok[metric].notna()] if metric in ok else ok.iloc[:0]  # (rows of one group, seeds)
        per_seed = part[trials].astype(int).tolist() if isinstance(trials, str) else trials
        est = logit_t_interval(part[metric].tolist(), per_seed)
        pooled = pooled_wilson(part[metric].tolist(), per_seed) if per_seed is not None else {}
        rows.append(
            {
                **group,
                "metric": metric,
                **est,
                "wilson_low": pooled.get("ci95_low", float("nan")),
                "wilson_high": pooled.get("ci95_high", float("nan")),
                "trials": pooled.get("trials", 0),
                "failed": failed,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            *keys,
            "metric",
            "n",
            "mean",
            "ci95_low",
            "ci95_high",
            "wilson_low",
            "wilson_high",
            "trials",
            "failed",
        ],
    )


# --- tests, multiplicity, power -----------------------------------------------------------------


def t_cdf(t: float, dof: int) -> float:
    """P(T <= t) for Student's t with ``dof`` degrees of freedom (±inf allowed)."""
    if math.isnan(t):
        return float("nan")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    half = t_central(abs(t), dof) / 2
    return 0.5 + half if t >= 0 else 0.5 - half


def _t_statistic(diffs: Sequence[float], shift: float = 0.0) -> tuple[float, int]:
    """(mean − shift) / standard error and the degrees of freedom; seeds that all agree give ±inf
    (or 0 when the mean is the shift itself); NaN with fewer than two values."""
    s = summarize(diffs)
    if s["n"] < 2:
        return float("nan"), max(s["n"] - 1, 0)
    x, se = s["mean"] - shift, s["std"] / math.sqrt(s["n"])
    if se == 0:
        return (0.0 if x == 0 else math.copysign(math.inf, x)), s["n"] - 1
    return x / se, s["n"] - 1


def paired_t_test(diffs: Sequence[float]) -> float:
    """The two-sided p-value of the paired t test of mean(diffs) = 0 (NaN with fewer than two)."""
    t, dof = _t_statistic(diffs)
    return float("nan") if math.isnan(t) else min(1.0, 2 * (1 - t_cdf(abs(t), dof)))


def one_sided_p(diffs: Sequence[float], shift: float, above: bool) -> float:
    """The one-sided p-value of H0: mean <= shift (``above``: the alternative is mean > shift)
    or H0: mean >= shift (mean < shift)."""
    t, dof = _t_statistic(diffs, shift)
    if math.isnan(t):
        return float("nan")
    return 1 - t_cdf(t, dof) if above else t_cdf(t, dof)


def tost(diffs: Sequence[float], margin: float) -> float:
    """Two one-sided tests of equivalence (Schuirmann 1987): the p-value of H0: |mean| >= margin,
    the larger of the one-sided p-values against −margin and +margin. Below α, the mean difference
    is shown to lie within ±margin (the 1 − 2α t interval lies inside the margins)."""
    if margin <= 0:
        raise ValueError(f"an equivalence margin must be > 0, got {margin}")
    return max(one_sided_p(diffs, -margin, above=True), one_sided_p(diffs, margin, above=False))


def outside_margin(diffs: Sequence[float], margin: float) -> float:
    """The p-value of H0: |mean| <= margin against a difference beyond the margin on the side of
    the mean (two-sided: twice the one-sided p, so below α the 1 − α interval lies outside ±margin)."""
    s = summarize(diffs)
    if s["n"] < 2:
        return float("nan")
    above = s["mean"] >= 0
    return min(1.0, 2 * one_sided_p(diffs, margin if above else -margin, above=above))


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value of paired pass/fail outcomes (McNemar 1947): of the trials
    where exactly one arm passed, ``only_a`` passed in a alone and ``only_b`` in b alone; under no
    difference each such trial is a fair coin, so p = min(1, 2·P(X ≤ min)) with X ~ Bin(n, ½),
    n = only_a + only_b (1 when n = 0: the arms never disagree)."""
    if only_a < 0 or only_b < 0:
        raise ValueError(f"need counts >= 0, got {only_a} and {only_b}")
    n = only_a + only_b
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


def mcnemar_pairs(
    trials: pd.DataFrame,
    arm: str,
    trial: str | Sequence[str],
    passed: str,
    group: str | Sequence[str] = (),
    baseline: str | None = None,
) -> pd.DataFrame:
    """Arms compared trial by trial where every arm read the same trials (the same prompts under two
    methods): one row per ``group`` value and pair of arms (each against ``baseline`` when given,
    else every pair), with the trials each passed, those only one passed, the exact McNemar
    p-value, that p Holm-corrected over the whole table, and the reading at α = 0.05 ("<arm>
    higher" or "no difference shown"). ``trials`` has one row per (group, trial, arm); ``trial``
    names the column(s) that identify a trial inside its group, ``passed`` its pass/fail column."""
    group = [group] if isinstance(group, str) else list(group)
    index = [trial] if isinstance(trial, str) else list(trial)
    rows = []
    for key, part in trials.groupby(group, sort=True) if group else [((), trials)]:
        found = part.pivot(index=index, columns=arm, values=passed).astype(bool)
        arms = sorted(found.columns)
        if baseline is None:
            pairs = [(a, b) for i, a in enumerate(arms) for b in arms[i + 1 :]]
        elif baseline in found.columns:
            pairs = [(baseline, b) for b in arms if b != baseline]
        else:
            raise ValueError(f"baseline {baseline!r} is not an arm: {arms}")
        for a, b in pairs:
            only_a, only_b = int((found[a] & ~found[b]).sum()), int((~found[a] & found[b]).sum())
            rows.append(
                {
                    **dict(zip(group, key if isinstance(key, tuple) else (key,))),
                    "a": a,
                    "b": b,
                    "trials": len(found),
                    "a found": int(found[a].sum()),
                    "b found": int(found[b].sum()),
                    "only a": only_a,
                    "only b": only_b,
                    "p (McNemar)": mcnemar_exact(only_a, only_b),
                }
            )
    columns = [*group, "a", "b", "trials", "a found", "b found", "only a", "only b", "p (McNemar)"]
    table = pd.DataFrame(rows, columns=columns)
    table["p (Holm)"] = holm(list(table["p (McNemar)"]))
    table["reading"] = [
        f"{r['a'] if r['only a'] > r['only b'] else r['b']} higher" if r["p (Holm)"] < 0.05 else "no difference shown"
        for _, r in table.iterrows()
    ]
    return table


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input's order: the i-th smallest of m
    becomes max over j <= i of min(1, (m − j + 1)·p_(j)). NaN stays NaN and does not count in m."""
    known = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    out, running, m = [float("nan")] * len(pvalues), 0.0, len(known)
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (false discovery rate, 1995), in the input's order: the
    i-th smallest of m becomes min over j >= i of min(1, m·p_(j)/j). NaN stays NaN."""
    known = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    out, running, m = [float("nan")] * len(pvalues), 1.0, len(known)
    for rank in range(m - 1, -1, -1):
        p, i = known[rank]
        running = min(running, m * p / (rank + 1))
        out[i] = running
    return out


CORRECTIONS = {"holm": holm, "bh": benjamini_hochberg}


def minimum_detectable_effect(
    sd: float, n: int, alpha: float = 0.05, power: float = 0.8, kind: str = "difference"
) -> float:
    """The smallest true mean difference a paired t test on ``n`` seeds with per-seed spread ``sd``
    detects with probability ``power`` at level ``alpha`` (the usual approximation (t_a + t_b)·sd/√n,
    central t quantiles, n − 1 degrees of freedom). ``kind``: ``difference`` (two-sided), ``one-sided``
    (a non-inferiority bound), ``equivalence`` (the smallest margin TOST shows when the true
    difference is 0: t at 1 − α one-sided, and 1 − (1 − power)/2). NaN with fewer than two seeds."""
    if n < 2 or math.isnan(sd):
        return float("nan")
    dof = n - 1
    if kind == "difference":
        a, b = t_quantile(1 - alpha, dof), t_quantile(2 * power - 1, dof)
    elif kind == "one-sided":
        a, b = t_quantile(1 - 2 * alpha, dof), t_quantile(2 * power - 1, dof)
    elif kind == "equivalence":
        a, b = t_quantile(1 - 2 * alpha, dof), t_quantile(power, dof)
    else:
        raise ValueError(f"kind must be difference, one-sided or equivalence, got {kind!r}")
    return (a + b) * sd / math.sqrt(n)


def accuracy_gap_bounds(base: Sequence[float]) -> tuple[float, float]:
    """The range the mean of per-seed accuracy differences a − b can take given the base accuracies
    b of those seeds: a lies in [0, 1], so a − b lies in [−mean b, 1 − mean b]."""
    xs = [float(v) for v in base if not math.isnan(float(v))]
    if not xs:
        return -1.0, 1.0
    b = sum(xs) / len(xs)
    return -b, 1 - b
