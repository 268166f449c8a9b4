"""Numbers over seeds: a mean with its 95% Student-t interval (``posenc.analysis.stats``), read
from the rows of a suite table that match a selection. A verdict compares intervals: "holds"
needs the interval to clear the threshold; overlap means "not separated".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from posenc.analysis.stats import summarize


@dataclass
class Estimate:
    """Mean over seeds and its 95% interval (NaN bounds with one seed)."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate:
        s = summarize(list(values))
        return cls(s["mean"], s["ci95_low"], s["ci95_high"], s["n"])

    def __str__(self) -> str:
        if self.n == 0:
            return "—"
        if math.isnan(self.low):
            return f"{self.mean:.3g}"
        return f"{self.mean:.3g} [{self.low:.3g}, {self.high:.3g}]"

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


def completed(table: pd.DataFrame | None) -> pd.DataFrame | None:
    if table is None:
        return None
    return table[table["status"] == "completed"] if "status" in table else table


def select(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """Rows where every ``column=value`` holds (a list or tuple value: any of its items)."""
    for key, value in where.items():
        table = table[table[key].isin(value)] if isinstance(value, (list, tuple)) else table[table[key] == value]
    return table


def estimate(table: pd.DataFrame, column: str, **where: Any) -> Estimate:
    """Over seeds: the mean of ``column`` in the rows matching ``where`` (one value per seed)."""
    part = select(table, **where)
    if column not in part:
        return Estimate.of([])
    per_seed = part.groupby("seed")[column].mean() if "seed" in part else part[column]
    return Estimate.of(per_seed.dropna().tolist())


def difference(table: pd.DataFrame, a: str, b: str, **where: Any) -> Estimate:
    """Over seeds: column ``a`` minus column ``b`` (paired within each seed)."""
    part = select(table, **where)
    if a not in part or b not in part:
        return Estimate.of([])
    per_seed = (part[a] - part[b]).groupby(part["seed"]).mean() if "seed" in part else part[a] - part[b]
    return Estimate.of(per_seed.dropna().tolist())


def paired(a: pd.DataFrame, b: pd.DataFrame, columns: Sequence[str]) -> Estimate:
    """Over seeds: the mean of ``columns`` in ``a`` minus that in ``b``, paired by seed."""
    pa, pb = (t.groupby("seed")[list(columns)].mean().mean(axis=1) for t in (a, b))
    return Estimate.of((pa - pb).dropna().tolist())
