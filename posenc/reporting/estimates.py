"""Numbers over seeds, read from the rows of a suite table that match a selection, each with its
95% interval and its number of seeds n (``posenc.analysis.stats``):

* ``estimate`` — an unbounded metric (bits per byte, a residual): the Student-t interval;
* ``accuracy`` — an accuracy, whose interval stays inside [0, 1]: the t interval of the mean logit
  over seeds, mapped back (with the table's items per seed, a column ``<experiment>.eval_items``,
  as the empirical logit, and the interval also spans the Wilson interval of the pooled items);
  where a seed sits at exactly 0 or 1 and the items are not recorded, the percentile bootstrap
  over seeds; one seed: the Wilson interval of its items, or the value;
* ``difference``, ``paired``, ``gap`` — comparisons paired by seed: the t interval of the per-seed
  differences (for accuracies clipped to what the base allows: [−b, 1 − b] for a − b on a base b);
* ``Test`` and ``Family`` — a claim about a paired difference ("<", "≈", …) as a test with its
  p-value, corrected within its family (Holm, or Benjamini–Hochberg), read as one of three outcomes:
  agrees, disagrees, inconclusive; each with its minimum detectable effect at its n.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from posenc.analysis.stats import (
    CORRECTIONS,
    accuracy_gap_bounds,
    bootstrap_interval,
    logit_t_interval,
    minimum_detectable_effect,
    one_sided_p,
    outside_margin,
    paired_difference,
    paired_t_test,
    pooled_wilson,
    summarize,
    tost,
    verdict,
)

ACCURACY_GAP = "accuracy"  # bounds of a difference of accuracies: what the base b allows, [−b, 1 − b]
ITEMS = ".eval_items"  # a table column <experiment>.eval_items: items behind each accuracy
ITEM_COLUMNS = ("items",)  # the extrapolation tables' sequences scored per cell


@dataclass
class Estimate:
    """Mean over seeds, its 95% interval (NaN bounds with one seed) and the number of seeds n."""

    mean: float
    low: float
    high: float
    n: int
    items: int | None = None  # evaluation items behind each seed's accuracy, where recorded
    bootstrap: bool = False  # an accuracy whose items are unknown: the bootstrap over seeds
    proportion: bool = False  # an accuracy: its string says its items, or that they are unknown

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
        bootstrap = len(xs) >= 2 and trials is None and any(x in (0.0, 1.0) for x in xs)
        if bootstrap:
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
        return cls(s["mean"], s["ci95_low"], s["ci95_high"], s["n"], trials, bootstrap, proportion=True)

    @classmethod
    def paired(
        cls, a: Mapping[Any, float], b: Mapping[Any, float], bounds: tuple[float, float] | str | None = None
    ) -> Estimate:
        """a − b over the seeds both have ({seed: value}): the t interval of the per-seed differences,
        clipped to ``bounds`` (``ACCURACY_GAP``: what b's accuracies allow, [−mean b, 1 − mean b])."""
        d = paired_difference(dict(a), dict(b), bounds=gap_bounds(a, b, bounds))
        return cls(d["mean_diff"], d["ci95_low"], d["ci95_high"], d["n"])

    def __str__(self) -> str:
        if self.n == 0:
            return "—"
        if self.bootstrap:
            n = f"n={self.n}, items unknown: bootstrap over seeds"
        elif self.items:
            n = f"n={self.n}, {self.items} items"
        else:
            n = f"n={self.n}" + (", items unknown" if self.proportion else "")
        if math.isnan(self.low):
            return f"{self.mean:.3g} ({n})"
        return f"{self.mean:.3g} [{self.low:.3g}, {self.high:.3g}] ({n})"

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
    """How many items each accuracy of the table is over, where the table records it (a column
    ``items``, or ``<experiment>.eval_items``): the fewest of its rows, so an interval never claims
    more items than a seed had."""
    cols = [c for c in table.columns if str(c) in ITEM_COLUMNS or str(c).endswith(ITEMS)]
    return int(table[cols[0]].min()) if cols and len(table) and table[cols[0]].notna().all() else None


def gap_bounds(
    a: Mapping[Any, float], b: Mapping[Any, float], bounds: tuple[float, float] | str | None
) -> tuple[float, float] | None:
    """``bounds`` as numbers: ``ACCURACY_GAP`` becomes the range a − b can take given the base b
    on the seeds both arms have."""
    if bounds != ACCURACY_GAP:
        return bounds  # type: ignore[return-value]
    return accuracy_gap_bounds([float(b[s]) for s in a if s in b])


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


# --- claims as tests: three outcomes, corrected within a family ----------------------------------

AGREES, DISAGREES, INCONCLUSIVE = "agrees", "disagrees", "inconclusive"
DIFFERENCE = {"<": -1, "≪": -1, ">": 1, "≫": 1}  # a claimed difference a − b and its sign
BOUNDED = {"≲": -1, "≳": 1}  # a − b at most (≲) or at least (≳) about zero: within a margin of it
RELATIONS = (*DIFFERENCE, "≈", *BOUNDED)
ALPHA, POWER = 0.05, 0.8


@dataclass(frozen=True)
class Effect:
    """A published effect to set beside a test's minimum detectable effect: its value, what it is
    (the quantity and its unit) and where the paper gives it."""

    value: float
    of: str
    source: str
    comparable: bool = True  # the same quantity and unit as ours (else it is shown, not compared)


@dataclass
class Test:
    """A claim about the paired difference a − b ({seed: a − b}): ``<``/``>`` (``≪``/``≫``) the
    difference has that sign, ``≈`` it lies within ±``margin`` (TOST), ``≲``/``≳`` it is at most
    +``margin`` / at least −``margin`` (a one-sided non-inferiority test).

    ``p_agree`` is the p-value of the test that would show the claim, ``p_disagree`` that of the
    test that would show its opposite (the other sign; a difference beyond the margin); the test's
    p-value, the one its family corrects, is the smaller, and its side says which way it points."""

    name: str
    relation: str
    diffs: dict[Any, float]
    margin: float = 0.0
    estimate: Estimate = field(default_factory=lambda: Estimate.of([]))
    effect: Effect | None = None

    @classmethod
    def of(
        cls,
        name: str,
        relation: str,
        a: Mapping[Any, float],
        b: Mapping[Any, float],
        margin: float = 0.0,
        bounds: tuple[float, float] | str | None = None,
        effect: Effect | None = None,
        items: int | None = None,
    ) -> Test:
        """The claim ``a relation b``, paired by seed; ``items``: the evaluation items behind each
        seed's accuracies, where recorded."""
        if relation not in RELATIONS:
            raise ValueError(f"relation must be one of {', '.join(RELATIONS)}, got {relation!r}")
        if relation not in DIFFERENCE and margin <= 0:
            raise ValueError(f"'{relation}' needs an equivalence margin > 0 ({name})")
        diffs = {s: float(a[s]) - float(b[s]) for s in a if s in b and not math.isnan(float(a[s]) - float(b[s]))}
        estimate = Estimate.paired(a, b, bounds)
        estimate.items = items
        return cls(name, relation, diffs, margin, estimate, effect)

    @property
    def n(self) -> int:
        return len(self.diffs)

    @property
    def sd(self) -> float:
        return summarize(list(self.diffs.values()))["std"]

    @property
    def kind(self) -> str:
        """The test: a paired t test, TOST, or a one-sided test against a margin."""
        return "paired t" if self.relation in DIFFERENCE else "TOST" if self.relation == "≈" else "one-sided paired t"

    def p_values(self) -> tuple[float, float]:
        """(p_agree, p_disagree) on the per-seed differences; NaN with fewer than two seeds."""
        d = list(self.diffs.values())
        if self.n < 2:
            return float("nan"), float("nan")
        if self.relation in DIFFERENCE:
            p, sign = paired_t_test(d), DIFFERENCE[self.relation]
            mean = sum(d) / len(d)
            return (p, 1.0) if mean * sign > 0 else (1.0, p) if mean * sign < 0 else (1.0, 1.0)
        if self.relation == "≈":
            return tost(d, self.margin), outside_margin(d, self.margin)
        sign = BOUNDED[self.relation]  # ≲: shown below +margin agrees; shown above it disagrees
        edge = -sign * self.margin
        return (
            one_sided_p(d, edge, above=sign > 0),
            min(1.0, 2 * one_sided_p(d, edge, above=sign < 0)),
        )

    @property
    def p(self) -> float:
        return min(self.p_values())

    @property
    def testable(self) -> bool:
        """A paired test needs two seeds where both arms have a result."""
        return self.n >= 2

    def mde(self, alpha: float) -> float:
        """The smallest effect this test detects with power 0.8 at level ``alpha`` and its n (for
        ``≈``: the smallest margin TOST would show when the true difference is 0); NaN where every
        seed's difference is the same, so the seeds give no spread to size it from."""
        if self.testable and round(self.sd, 12) == 0:  # float noise of equal differences is no spread
            return float("nan")
        kind = "difference" if self.relation in DIFFERENCE else "equivalence" if self.relation == "≈" else "one-sided"
        return minimum_detectable_effect(self.sd, self.n, alpha, POWER, kind)

    def outcome(self, p_adjusted: float, alpha: float = ALPHA) -> str:
        if math.isnan(p_adjusted) or p_adjusted >= alpha:
            return INCONCLUSIVE
        agree, disagree = self.p_values()
        return AGREES if agree <= disagree else DISAGREES

    def claim(self) -> str:
        """The claim in symbols: "a − b < 0", "|a − b| < 0.02"."""
        if self.relation in DIFFERENCE:
            return f"{self.name} {self.relation} 0"
        if self.relation == "≈":
            return f"|{self.name}| < {self.margin:g}"
        below = self.relation == "≲"
        return f"{self.name} {'<' if below else '>'} {'' if below else '−'}{self.margin:g}"


@dataclass
class Family:
    """The tests of one claim or finding, corrected together (``holm``, or ``bh``: Benjamini–
    Hochberg) at ``alpha``. The family agrees when every test agrees, disagrees when any test
    disagrees, and is inconclusive otherwise."""

    name: str
    tests: list[Test]
    correction: str = ""  # empty: the data file's (configs/findings.yaml, verdicts.correction)
    alpha: float = math.nan  # NaN: the data file's (verdicts.alpha)
    model: str = ""  # the model the tests read, in words (its size)

    def __post_init__(self) -> None:
        if not self.correction or math.isnan(self.alpha):
            from posenc.reporting.literature import verdict_settings  # the data file imports Effect from here

            settings = verdict_settings()
            self.correction = self.correction or settings["correction"]
            self.alpha = settings["alpha"] if math.isnan(self.alpha) else self.alpha
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, got {self.correction!r}")

    @property
    def adjusted(self) -> list[float]:
        return CORRECTIONS[self.correction]([t.p for t in self.tests])

    @property
    def size(self) -> int:
        """How many tests the correction counts (those with a p-value)."""
        return sum(not math.isnan(t.p) for t in self.tests)

    @property
    def level(self) -> float:
        """The level each test's minimum detectable effect is computed at: α over the family's size
        (Holm's first step; the strictest level Benjamini–Hochberg uses)."""
        return self.alpha / max(self.size, 1)

    def outcomes(self) -> list[str]:
        return [t.outcome(p, self.alpha) for t, p in zip(self.tests, self.adjusted)]

    @property
    def verdict(self) -> str:
        outcomes = self.outcomes()
        if not outcomes:
            return INCONCLUSIVE
        if DISAGREES in outcomes:
            return DISAGREES
        return AGREES if all(o == AGREES for o in outcomes) else INCONCLUSIVE

    def counts(self) -> str:
        """ "2 agree, 1 inconclusive of 3 tests", and "; 2 untested (under 2 seeds)" for the
        comparisons too few seeds learned to test (they count as inconclusive in the verdict)."""
        outcomes = [o for t, o in zip(self.tests, self.outcomes()) if t.testable]
        words = {AGREES: "agree", DISAGREES: "disagree", INCONCLUSIVE: "inconclusive"}
        parts = [f"{outcomes.count(o)} {words[o]}" for o in (AGREES, DISAGREES, INCONCLUSIVE) if o in outcomes]
        untested = len(self.tests) - len(outcomes)
        counted = f"{', '.join(parts) or 'none'} of {len(outcomes)} test{'s' if len(outcomes) != 1 else ''}"
        return counted + (f"; {untested} untested (under 2 seeds)" if untested else "")

    def correction_words(self) -> str:
        name = {"holm": "Holm", "bh": "Benjamini–Hochberg"}[self.correction]
        return f"{name} over {self.size} test{'s' if self.size != 1 else ''}, α = {self.alpha:g}"

    def lines(self) -> list[str]:
        """One line per test: the claim, the estimate, the raw and corrected p-values, the outcome
        and the minimum detectable effect at the family's level (beside the paper's effect)."""
        out = []
        for t, p_adj, outcome in zip(self.tests, self.adjusted, self.outcomes()):
            if not t.testable:
                seeds = f"{t.n} seed{'s' if t.n != 1 else ''}"
                out.append(f"- {t.claim()}: {t.estimate}; untested: {seeds} with both arms (a paired test needs 2).")
                continue
            mde, paper = t.mde(self.level), ""
            # NaN: every seed's difference the same, no spread over seeds to size an effect from
            detectable = (
                f"— (every seed's difference is {_num(next(iter(t.diffs.values())))})" if math.isnan(mde) else _num(mde)
            )
            if t.effect is not None:
                short = " — underpowered for it" if t.effect.comparable and mde > abs(t.effect.value) / 2 else ""
                paper = f"; the paper's effect {t.effect.value:+.3g} ({t.effect.of}; {t.effect.source}){short}"
            margin = f", margin {t.margin:g}" if t.relation not in DIFFERENCE else ""
            out.append(
                f"- {t.claim()}: {t.estimate}; {t.kind}{margin}, p = {_p(t.p)}, corrected {_p(p_adj)} → "
                f"**{outcome}**; detectable at n={t.n}: {detectable}{paper}."
            )
        return out

    def mde_range(self) -> str:
        values = sorted(m for t in self.tests if not math.isnan(m := t.mde(self.level)))
        if not values:
            return "—"
        return _num(values[0]) if values[0] == values[-1] else f"{_num(values[0])}–{_num(values[-1])}"

    def seeds(self) -> str:
        ns = sorted({t.n for t in self.tests if t.testable} or {t.n for t in self.tests})
        return "—" if not ns else str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"

    def items(self) -> str:
        """The evaluation items behind each seed's accuracies, where the tests know them."""
        known = sorted({t.estimate.items for t in self.tests if t.estimate.items})
        return ", ".join(map(str, known)) if known else "—"

    def kinds(self) -> str:
        return ", ".join(dict.fromkeys(t.kind for t in self.tests))


def _p(p: float) -> str:
    return "—" if math.isnan(p) else f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def _num(x: float) -> str:
    return "—" if math.isnan(x) else f"{round(x, 12):.3g}"  # float noise of seeds that agree reads 0
