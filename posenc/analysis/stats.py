"""Multi-seed statistics: mean, standard deviation, n and a 95% Student-t confidence interval.

The t quantile comes from the closed form of the t distribution function for integer degrees
of freedom (Abramowitz & Stegun 26.7.3-4), inverted by bisection, so no SciPy is needed; the
tests check it against ``scipy.stats.t``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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


def aggregate(table: pd.DataFrame, keys: Sequence[str], metrics: Sequence[str],
              status: str | None = "status") -> pd.DataFrame:
    """One row per group of ``keys`` and metric: n, mean, std, 95% interval, and how many of
    the group's rows failed (``status`` column other than ``completed``; they are not averaged)."""
    keys = list(keys)
    rows = []
    grouped = table.groupby(keys, dropna=False, sort=False) if keys else [((), table)]
    for group, part in grouped:
        group = group if isinstance(group, tuple) else (group,)
        ok = part if status is None or status not in part else part[part[status] == "completed"]
        failed = len(part) - len(ok)
        for metric in metrics:
            values = ok[metric].tolist() if metric in ok else []
            rows.append({**dict(zip(keys, group)), "metric": metric, **summarize(values), "failed": failed})
    return pd.DataFrame(rows, columns=[*keys, "metric", "n", "mean", "std", "ci95_low", "ci95_high", "failed"])
