"""Numbers over seeds, read from the rows of a suite table that match a selection, each with its
95% interval and its number of seeds n (``posenc.analysis.stats``):

* ``estimate`` — an unbounded metric (bits per byte, a residual): the Student-t interval;
* ``accuracy`` — an accuracy, whose interval stays inside [0, 1]: the t interval of the mean logit
  over seeds, mapped back (with the table's items per seed, a column ``<experiment>.eval_items``,
  as the empirical logit, and the interval also spans the Wilson interval of the pooled items);
  where a seed sits at exactly 0 or 1 and the items are not recorded, the percentile bootstrap
  over seeds; one seed: the Wilson interval of its items, or the value;
* ``difference``, ``paired``, ``gap`` — comparisons paired by seed: the t interval of the per-seed
  differences (clipped to [−1, 1] for accuracies), whose sign is the verdict (``Estimate.verdict``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from posenc.analysis.stats import (
    bootstrap_interval,
    logit_t_interval,
    paired_difference,
    pooled_wilson,
    summarize,
    verdict,
)

ACCURACY_GAP = (-1.0, 1.0)  # the range a difference of two accuracies can take
ITEMS = ".eval_items"  # a table column <experiment>.eval_items: items behind each accuracy


@dataclass
class Estimate:
    """Mean over seeds, its 95% interval (NaN bounds with one seed) and the number of seeds n."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate:
        """The Student-t interval of the mean (an unbounded metric)."""
        s = summarize(list(values))
        return cls(s["mean"], s["ci95_low"], s["ci95_high"], s["n"])

    @classmethod
    def accuracy(cls, values: Sequence[float], trials: int | None = None) -> Estimate:
        """An interval inside [0, 1]: logit-scale t over seeds; with ``trials`` (items per seed) it
        also spans the Wilson interval of the pooled items, so seeds that agree exactly (every one
        at 1.0) still show the uncertainty of a finite test set; the bootstrap over seeds where a
        seed is at 0 or 1 and ``trials`` is unknown; one seed: Wilson on its items, or the value."""
        xs = [float(v) for v in values if not math.isnan(float(v))]
        if len(xs) >= 2 and trials is None and any(x in (0.0, 1.0) for x in xs):
            s = bootstrap_interval(xs)
        else:
            s = logit_t_interval(xs, trials) if len(xs) >= 2 else summarize(xs)
        if xs and trials is not None:
            w = pooled_wilson(xs, trials)
            s["ci95_low"], s["ci95_high"] = (
                (w["ci95_low"], w["ci95_high"])
                if len(xs) == 1
                else (min(s["ci95_low"], w["ci95_low"]), max(s["ci95_high"], w["ci95_high"]))
            )
        return cls(s["mean"], s["ci95_low"], s["ci95_high"], s["n"])

    @classmethod
    def paired(
        cls, a: Mapping[Any, float], b: Mapping[Any, float], bounds: tuple[float, float] | None = None
    ) -> Estimate:
        """a − b over the seeds both have ({seed: value}): the t interval of the per-seed differences."""
        d = paired_difference(dict(a), dict(b), bounds=bounds)
        return cls(d["mean_diff"], d["ci95_low"], d["ci95_high"], d["n"])

    def __str__(self) -> str:
        if self.n == 0:
            return "—"
        if math.isnan(self.low):
            return f"{self.mean:.3g} (n={self.n})"
        return f"{self.mean:.3g} [{self.low:.3g}, {self.high:.3g}] (n={self.n})"

    def verdict(self) -> str:
        """For a paired difference a − b: ``higher``, ``lower`` or ``no difference shown`` (the
        interval contains 0, or fewer than two seeds)."""
        return verdict({"ci95_low": self.low, "ci95_high": self.high})

    @property
    def lowest(self) -> float:
        """The interval's lower bound (one seed: the value)."""
        return self.mean if math.isnan(self.low) else self.low

    @property
    def highest(self) -> float:
        return self.mean if math.isnan(self.high) else self.high

    def above(self, x: float) -> bool:
        """The interval lies above x (one seed: the value does)."""
        return self.n > 0 and self.lowest > x

    def below(self, x: float) -> bool:
        return self.n > 0 and self.highest < x

    def holds(self, x: float) -> bool:
        """The interval contains x: not separated from it."""
        return not self.above(x) and not self.below(x)


REACHED = "reached_target"  # a run's record of whether its model reached its training target


def under_target(table: pd.DataFrame) -> pd.Series:
    """Rows whose model is recorded as not reaching its training target ("did not learn"); a table
    without the column, or a row without a record, has none."""
    if REACHED not in table:
        return pd.Series(False, index=table.index)
    return table[REACHED].map(lambda v: str(v).strip().lower() in ("false", "0", "0.0"))


def completed(table: pd.DataFrame | None) -> pd.DataFrame | None:
    if table is None:
        return None
    return table[table["status"] == "completed"] if "status" in table else table


def select(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """Rows where every ``column=value`` holds (a list or tuple value: any of its items)."""
    for key, value in where.items():
        table = table[table[key].isin(value)] if isinstance(value, (list, tuple)) else table[table[key] == value]
    return table


def per_seed(table: pd.DataFrame, columns: str | Sequence[str], **where: Any) -> dict[Any, float]:
    """{seed: the mean of ``columns`` over the rows matching ``where``} (no seed column: by row)."""
    part = select(table, **where)
    cols = [columns] if isinstance(columns, str) else list(columns)
    if not cols or not set(cols) <= set(part.columns) or not len(part):
        return {}
    values = part[cols].mean(axis=1, skipna=False)
    values = values.groupby(part["seed"]).mean() if "seed" in part else values
    return values.dropna().to_dict()


def estimate(table: pd.DataFrame, column: str, **where: Any) -> Estimate:
    """Over seeds: the mean of an unbounded ``column`` in the rows matching ``where``, t interval."""
    return Estimate.of(list(per_seed(table, column, **where).values()))


def items(table: pd.DataFrame) -> int | None:
    """How many items each accuracy of the table is over, where the table records it."""
    cols = [c for c in table.columns if str(c).endswith(ITEMS)]
    return int(table[cols[0]].min()) if cols and len(table) and table[cols[0]].notna().all() else None


def accuracy(table: pd.DataFrame, column: str, **where: Any) -> Estimate:
    """Over seeds: the mean accuracy in ``column`` of the rows matching ``where``, bounded interval."""
    return Estimate.accuracy(list(per_seed(table, column, **where).values()), items(select(table, **where)))


def difference(
    table: pd.DataFrame, a: str, b: str, bounds: tuple[float, float] | None = None, **where: Any
) -> Estimate:
    """Over seeds: column ``a`` minus column ``b`` (paired within each seed)."""
    return Estimate.paired(per_seed(table, a, **where), per_seed(table, b, **where), bounds)


def paired(
    a: pd.DataFrame, b: pd.DataFrame, columns: Sequence[str], bounds: tuple[float, float] | None = None
) -> Estimate:
    """Over seeds: the mean of ``columns`` in ``a`` minus that in ``b``, paired by seed."""
    return Estimate.paired(per_seed(a, columns), per_seed(b, columns), bounds)


def change(table: pd.DataFrame, a: str, b: str, **where: Any) -> dict[Any, float]:
    """{seed: column ``a`` minus column ``b``} over the rows matching ``where`` (a rise, a drop)."""
    pa, pb = per_seed(table, a, **where), per_seed(table, b, **where)
    return {s: pa[s] - pb[s] for s in pa if s in pb}
