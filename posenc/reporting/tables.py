"""The tables the report reads, declared in one place, and the parts of a report section.

``REPORT_TABLES`` names every table the report reads: the long tables ``posenc.launch.suite.collect``
makes (one row per table row of every job, with its ``seed``), each filled by the suite's sweeps
that name it (``table:`` in a suite YAML, by default the sweep's own name), from a table its
experiment's protocol declares (a ``TableSpec``). ``check_tables`` holds a suite to it: renaming a
sweep keeps every section as long as the sweep still names its table; a table no sweep fills stops
the report in one line, unless a run left its sweeps out on purpose (``--only``), and then its
sections say it was not run. Which schemes play which part is asked of their classes (``encodes``,
``ndim``, ``adds_bias``), never listed here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pandas as pd

from posenc.core.errors import ConfigError, UserError
from posenc.engine.config import instantiate, option_class, option_node, target_class
from posenc.engine.context import TableSpec, main_table
from posenc.launch.suite import SIDE_TABLES
from posenc.pe.resample import MODES
from posenc.reporting.estimates import (
    Estimate,
    Family,
    accuracy,
    change,
    completed,
    difference,
    estimate,
    under_target,
)

Tables = dict[str, pd.DataFrame]
TEXT_TASK = "text"  # the task whose corpus the text table reads (its option name)
Meta = dict[str, Any]


@dataclass(frozen=True)
class ReportTable:
    """A table the report reads: ``name`` (what a suite sweep's ``table:`` says), the experiment
    option whose protocol writes its rows, and which of that protocol's tables (``source``; empty:
    its main table). A side table (``side_of``) comes with the sweeps of another table
    (``resolution_similarity`` from the runs of ``resolution``). ``fill`` is the sweep overrides
    that fill it; rows pair across schemes, scalings and methods on ``pairs``."""

    name: str
    experiment: str
    fill: str = ""
    source: str = ""
    side_of: str = ""
    pairs: tuple[str, ...] = ("seed",)
    optional: bool = False  # read where a suite fills it; a suite without it reports all the same
    # a variant of another table (``reads_as``) that its sections read again: the same protocol at
    # other model sizes (``varies="size"``, a scale sweep) or under a fixed training budget ("budget")
    reads_as: str = ""
    varies: str = ""

    def spec(self) -> TableSpec:
        """The protocol's declaration of the table these rows come from."""
        protocol = target_class(option_node("experiment", self.experiment)["protocol"], "protocol")
        if not self.source:
            return main_table(protocol)
        return next(t for t in protocol.tables if t.name == self.source)

    @property
    def keys(self) -> tuple[str, ...]:
        """The columns that tell one row from another within a job (the protocol's keys)."""
        return self.spec().keys


TEXT = ReportTable("extrapolation_text", "extrapolation", "experiment=extrapolation task=text")
TARGET = ReportTable(
    "extrapolation_target", "extrapolation", "experiment=extrapolation task=text pe=rope extrapolation.factor=4"
)
PASSKEY = ReportTable("extrapolation_passkey", "extrapolation", "experiment=extrapolation task=passkey")
PASSKEY_DEPTH = ReportTable("extrapolation_passkey_depth", "extrapolation", source="depth", side_of=PASSKEY.name)
RESOLUTION = ReportTable("resolution", "resolution", "experiment=resolution")
SIMILARITY = ReportTable("resolution_similarity", "resolution", source="similarity", side_of=RESOLUTION.name)
RELATIONAL = ReportTable("resolution_relational", "resolution", "experiment=resolution task.label=above")
ORDER = ReportTable("order", "order", "experiment=order")
CHECK = ReportTable("check", "check", "experiment=check")
# Kazemnejad et al.'s protocol: algorithmic tasks trained at L, exact match at L and 2L, rows by task
ALGORITHMIC = ReportTable("algorithmic", "extrapolation", "experiment=extrapolation task=copy", optional=True)
# the same protocols at other model sizes (a scale sweep) and under a fixed budget (no target)
OTHER_SIZES = "model.d_model=… model.n_layers=…"
TEXT_SCALE = ReportTable(
    "extrapolation_text_scale",
    "extrapolation",
    f"{TEXT.fill} {OTHER_SIZES}",
    optional=True,
    reads_as=TEXT.name,
    varies="size",
)
TARGET_SCALE = ReportTable(
    "extrapolation_target_scale",
    "extrapolation",
    f"{TARGET.fill} {OTHER_SIZES}",
    optional=True,
    reads_as=TARGET.name,
    varies="size",
)
TEXT_FIXED = ReportTable(
    "extrapolation_text_fixed",
    "extrapolation",
    f"{TEXT.fill} train.target_bpb=null",
    optional=True,
    reads_as=TEXT.name,
    varies="budget",
)
PASSKEY_FIXED = ReportTable(
    "extrapolation_passkey_fixed",
    "extrapolation",
    f"{PASSKEY.fill} train.target_accuracy=null",
    optional=True,
    reads_as=PASSKEY.name,
    varies="budget",
)
REPORT_TABLES = (
    TEXT,
    TARGET,
    PASSKEY,
    PASSKEY_DEPTH,
    RESOLUTION,
    SIMILARITY,
    RELATIONAL,
    ORDER,
    CHECK,
    ALGORITHMIC,
    TEXT_SCALE,
    TARGET_SCALE,
    TEXT_FIXED,
    PASSKEY_FIXED,
)


def check_tables(filled: Mapping[str, Collection[str]], left_out: Collection[str] = ()) -> bool:
    """Whether the report reads this suite: every table it reads is filled (``filled``: {table:
    the sweeps that fill it}) or was left out on purpose (``left_out``: the tables of the sweeps a
    run did not run). A suite that fills some of them but not all is a ``UserError`` naming the
    first missing table and the sweep that would fill it (a sweep renamed without ``table:``); a
    suite that fills none of them (a researcher's own) is no reference suite: False."""
    declared = {t.name for t in REPORT_TABLES}
    required = {t.name for t in REPORT_TABLES if not t.optional}
    if not any(filled.get(name) for name in required) and not set(left_out) & required:
        return False
    for t in REPORT_TABLES:
        if t.side_of or t.optional or filled.get(t.name) or t.name in left_out:
            continue
        unread = [f"{n} ({', '.join(filled[n])})" for n in sorted(filled) if n not in declared]
        also = f"; the suite fills {', '.join(unread)}, which the report does not read" if unread else ""
        raise UserError(
            f"the report reads the table '{t.name}', which no sweep of the suite fills: give the sweep "
            f"that runs {t.fill} the line `table: {t.name}`{also}"
        )
    return True


def filled_tables(tables: Mapping[str, Any], meta: Meta) -> tuple[dict[str, list[str]], set[str]]:
    """({table: the sweeps that fill it}, the tables of the sweeps left out) of a suite's record
    (``suite.json``) and its collected tables."""
    filled: dict[str, list[str]] = {name: [] for name in tables}
    for name, sweep in (meta.get("sweeps") or {}).items():
        filled.setdefault(sweep.get("table") or name, []).append(name)
    return {k: v or [k] for k, v in filled.items()}, set((meta.get("left_out") or {}).values())


def sweeps_of(meta: Meta, table: str) -> list[tuple[str, dict[str, Any]]]:
    """The suite's sweeps that fill ``table``, the one named like it first."""
    found = [(n, s) for n, s in (meta.get("sweeps") or {}).items() if (s.get("table") or n) == table]
    return sorted(found, key=lambda item: item[0] != table)


@dataclass
class Section:
    key: str  # "C5" or a paper's short name
    title: str
    statement: str
    lines: list[str] = field(default_factory=list)
    families: list[Family] = field(default_factory=list)  # its verdicts: tests corrected together

    def text(self) -> str:
        body: list[str] = []
        for line in self.lines:  # a paragraph per line, tables kept whole
            if body and body[-1] and line and not (body[-1].startswith("|") and line.startswith("|")):
                body.append("")
            body.append(line)
        return "\n".join([f"### {self.key} — {self.title}", "", f"*{self.statement}*", "", *body, ""])


def missing(tables: Tables, name: str) -> list[str]:
    """Why a section has nothing to read: the sweep did not run, or none of its models learned."""
    t = completed(tables.get(name))
    if t is not None and len(t) and under_target(t).all():
        return [
            f"Not measured: no model of the suite's `{name}` sweep reached its training target "
            '(see "Models under their training target").'
        ]
    return [f"Not measured: the table `{name}` was not run (its sweeps were left out: `posenc suite --only …`)."]


def md(table: pd.DataFrame) -> str:
    return table.to_markdown(index=False, floatfmt=".3g")


# --- what a scheme, scaling or method is: asked of its class -------------------------------------


@cache
def _class(group: str, name: str) -> Any:
    try:
        return option_class(group, name)
    except ConfigError:
        return None  # a scheme from outside the config tree: no facts, no category


def schemes_where(names: Iterable[str], predicate: Callable[[Any], bool], group: str = "pe") -> list[str]:
    """The names (in table order, once each) whose option class satisfies ``predicate``."""
    return [n for n in dict.fromkeys(map(str, names)) if (c := _class(group, n)) is not None and predicate(c)]


def encoding(names: Iterable[str], what: str) -> list[str]:
    """The schemes among ``names`` that encode ``what``: nothing, absolute or relative positions."""
    return schemes_where(names, lambda c: c.encodes == what)


def unscaled(names: Iterable[str]) -> list[str]:
    """The scalings among ``names`` that leave the scheme as trained (Hugging Face's ``default``)."""
    return schemes_where(names, lambda c: c.hf_rope_type == "default", group="scale")


def moves_grid(method: str) -> bool:
    """A resolution method that moves the trained coordinates onto the new grid (a resampling mode
    or ``interpolate``), against one that keeps the new grid's raw coordinates (``extrapolate``, ``clip``)."""
    return method in MODES or method == "interpolate"


# --- the tables ----------------------------------------------------------------------------------


def lengths(table: pd.DataFrame) -> list[str]:
    """The length columns of an extrapolation table (``"64"``, ``"128"``, …), ascending."""
    return sorted((c for c in table.columns if str(c).isdigit()), key=int)


def pixels(table: pd.DataFrame) -> list[str]:
    """The resolution columns of a resolution table (``"16px"``, …), ascending."""
    return sorted(
        (c for c in table.columns if str(c).endswith("px") and str(c)[:-2].isdigit()), key=lambda c: int(c[:-2])
    )


TEST_SPLIT = "test"  # the split a table's ``split`` column names for the held-out numbers


def present(tables: Tables, name: str, everyone: bool = False) -> pd.DataFrame | None:
    """The completed rows of a table whose model reached its training target (``everyone``: also
    those that did not learn), on the test split where the table has a ``split`` column, or None
    when the sweep did not run or nothing is left."""
    t = completed(tables.get(name))
    if t is not None and "split" in t and (t["split"] == TEST_SPLIT).any():
        t = t[t["split"] == TEST_SPLIT]
    if t is not None and not everyone:
        t = t[~under_target(t)]
    return t if t is not None and len(t) else None


def side_table(name: str, tables: Tables) -> bool:
    """A sweep's side table (``resolution_similarity``): its models are its sweep's, named there."""
    return any(name == f"{sweep}_{side}" for sweep in tables for side in SIDE_TABLES)


def controls(meta: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{table: {option: why it cannot learn the label}}: the controls a suite's record
    (``suite.json``) names per sweep, gathered by the table the sweep fills."""
    out: dict[str, dict[str, str]] = {}
    for name, sweep in (meta.get("sweeps") or {}).items():
        out.setdefault(sweep.get("table") or name, {}).update(sweep.get("controls") or {})
    return out


def did_not_learn(tables: Tables, expected: dict[str, dict[str, str]] | None = None) -> tuple[list[str], list[str]]:
    """Per table that records it: which models did not reach their training target, by scheme
    (and model, attention where the table has them) and seed, as two lists of lines: the models
    that fell short, and the controls (``expected``: {table: {scheme: reason}}) that cannot learn
    the label by construction, with how many seeds of each stayed under target."""
    short, control_lines, recorded = [], [], False
    for name, table in tables.items():
        t = completed(table)
        if t is None or "reached_target" not in t or side_table(name, tables):
            continue
        recorded = True
        reasons = (expected or {}).get(name, {})
        # the task where one table holds several (the algorithmic table), so each run is named once
        keys = [k for k in ("task", "model", "attention", "pe") if k in t and (k != "task" or t[k].nunique() > 1)]
        run_keys = [*keys, "seed"] if "seed" in t else keys
        # a run is under target when any of its rows records it (the order table's init rows record nothing)
        runs = t.assign(_under=under_target(t)).groupby(run_keys, sort=False, as_index=False)["_under"].any()
        # a control is named by some of the run's identity values: "nope", or "bidirectional nope"
        identity = runs[keys].astype(str).apply(set, axis=1)
        control = identity.map(lambda values: next((c for c in reasons if set(c.split()) <= values), None))
        under = runs[runs["_under"] & control.isna()]
        if len(under):
            named = "; ".join(
                f"{' '.join(map(str, group if isinstance(group, tuple) else (group,)))} (seed "
                f"{', '.join(str(s) for s in part['seed'])})"
                for group, part in under.groupby(keys, sort=False)
            )
            short.append(f"- `{name}`: {len(under)} did not learn — {named}.")
        for which, part in runs[control.notna()].groupby(control[control.notna()], sort=False):
            missed = int(part["_under"].sum())
            control_lines.append(f"- `{name}` {which}: {missed} of {len(part)} runs under target — {reasons[which]}")
    if recorded and not short:
        short.append("Every model reached its training target" + (" (the controls apart)." if control_lines else "."))
    return short, control_lines


def ext_table(tables: Tables, name: str = TEXT.name) -> pd.DataFrame | None:
    t = present(tables, name)
    if t is None:
        return None
    return t[t["finetune_steps"] == 0] if "finetune_steps" in t else t


ACCURACIES = ("exact_match", "accuracy")  # the metrics that are proportions, the primary one first


def scorer(metric: str) -> Callable[..., Estimate]:
    """How a metric is estimated over seeds: accuracies with a bounded interval, others with t."""
    return accuracy if metric in ACCURACIES else estimate


def primary_metric(t: pd.DataFrame) -> str:
    """The accuracy a retrieval table is read by: exact match of the whole answer where the table
    records it, else per-item accuracy."""
    recorded = set(t["metric"].unique()) if "metric" in t else set()
    return next((m for m in ACCURACIES if m in recorded), ACCURACIES[-1])


def chance_levels(t: pd.DataFrame) -> str:
    """ "0.1" (or "0.1, 0.5") where the table records its chance level (a ``chance`` column), else ""."""
    if "chance" not in t or not t["chance"].notna().any():
        return ""
    return ", ".join(sorted({f"{float(v):.3g}" for v in t["chance"].dropna()}, key=float))


def chance_words(t: pd.DataFrame) -> str:
    """ "; chance 0.1" where the table records its chance level, else ""."""
    return f"; chance {levels}" if (levels := chance_levels(t)) else ""


def extrapolation_table(t: pd.DataFrame, metric: str) -> pd.DataFrame:
    """(pe, scale) × length: mean [95% interval] (n seeds) of ``metric`` over seeds."""
    rows, score = [], scorer(metric)
    for (pe, scale), part in t[t["metric"] == metric].groupby(["pe", "scale"], sort=False):
        rows.append({"pe": pe, "scale": scale, **{n: str(score(part, n)) for n in lengths(t)}})
    return pd.DataFrame(rows)


def unigram_baseline(t: pd.DataFrame) -> tuple[float, str] | None:
    """The corpus's unigram bits per byte and where it comes from: the table's ``unigram_bpb`` where
    it records it, else that of the text task's built-in corpus as this machine builds it."""
    if "unigram_bpb" in t and t["unigram_bpb"].notna().any():
        return float(t["unigram_bpb"].dropna().iloc[0]), ""
    try:
        value = float(instantiate(option_node("task", TEXT_TASK), "task").unigram_bits_per_byte())
    except (ConfigError, OSError, ImportError):  # a corpus this machine cannot build: said so in the line
        return None
    return value, " (the table does not record it: computed from the text task's built-in corpus on this machine)"


def ranking(order: list[str], per_seed_values: dict[str, dict]) -> str:
    """ "a < b = c < d": neighbours with the same value in every seed are tied, not ordered."""
    out = order[:1]
    for prev, sc in zip(order, order[1:]):
        same = per_seed_values[prev] == per_seed_values[sc] and per_seed_values[sc]
        out.append(f"{'=' if same else '<'} {sc}")
    return " ".join(out) + (" (= : identical in every seed)" if any(x.startswith("=") for x in out) else "")


def multiple(t: pd.DataFrame) -> str:
    """The longest evaluated length as a multiple of the training length (``16×``)."""
    ns = lengths(t)
    return f"{int(ns[-1]) / int(ns[0]):g}×"


def as_trained(t: pd.DataFrame) -> pd.DataFrame:
    """The rows of an extrapolation table without rescaling."""
    return t[t["scale"].isin(unscaled(t["scale"].unique()))]


def rise(t: pd.DataFrame, pe: str, scale: str | None = None, metric: str = "bpb") -> Estimate:
    """Longest evaluated length minus the training length, paired by seed (default: unscaled)."""
    ns = lengths(t)
    rows = as_trained(t) if scale is None else t[t["scale"] == scale]
    return difference(rows, ns[-1], ns[0], pe=pe, metric=metric)


def rises(t: pd.DataFrame, pe: str, metric: str = "bpb") -> dict[Any, float]:
    """{seed: the unscaled rise of ``rise``}, to compare two schemes' rises paired by seed."""
    ns = lengths(t)
    return change(as_trained(t), ns[-1], ns[0], pe=pe, metric=metric)


def order_rows(tables: Tables) -> pd.DataFrame | None:
    return present(tables, ORDER.name, everyone=True)  # whether order can be learned is what it measures


def train_px(r: pd.DataFrame) -> str:
    """The training resolution: the column where every method agrees before fine-tuning."""
    cols = pixels(r)
    p = r[r["finetune_steps"] == 0]
    spread = {c: float(p.groupby(["pe", "seed"])[c].agg(lambda v: v.max() - v.min()).max()) for c in cols}
    return min(cols, key=lambda c: (spread[c], cols.index(c)))


def resolution_table(r: pd.DataFrame, finetune: int) -> pd.DataFrame:
    rows = []
    for (pe, method), part in r[r["finetune_steps"] == finetune].groupby(["pe", "method"], sort=False):
        rows.append({"pe": pe, "method": method, **{c: str(accuracy(part, c)) for c in pixels(r)}})
    return pd.DataFrame(rows)


# --- what the suite ran: its metadata ------------------------------------------------------------


def report_format(meta: Meta) -> str:
    """The file format of the report's figures: the ``plots.format`` its sweeps ran with (``posenc
    suite plots.format=svg``), else png."""
    from posenc.reporting.style import FORMATS

    for sweep in (meta.get("sweeps") or {}).values():
        for o in sweep.get("overrides") or []:
            key, _, value = str(o).partition("=")
            if key.lstrip("+") == "plots.format" and value in FORMATS:
                return value
    return "png"


def pe_lr_words(model: dict[str, Any]) -> str:
    """ "position parameters at 10× the lr" for a recorded model trained with ``train.pe_lr_scale``
    other than 1, else ""."""
    scale = float(model.get("pe_lr_scale", 1.0))
    return "" if scale == 1 else f"position parameters at {scale:g}× the lr"


def override(sweep: dict[str, Any], key: str) -> str | None:
    """The value a recorded sweep sets ``key`` to in its overrides ("alibi,fire" for pe), or None."""
    return next((v.split("=", 1)[1] for v in sweep.get("overrides", []) if v.split("=", 1)[0] == key), None)


def about(meta: Meta, name: str, table: pd.DataFrame | None = None) -> dict[str, str]:
    """Words for the prose about the table ``name``: ``seeds`` ("3 seeds", counted in the table,
    else the suite's) and ``model`` ("2-layer, 64-wide model (lm_tiny, 400 training steps)") from
    the suite's record of the sweeps that fill it."""
    n = int(table["seed"].nunique()) if table is not None and "seed" in table else len(meta.get("seeds") or [])
    filling = sweeps_of(meta, name)
    m = (filling[0][1].get("model") if filling else None) or {}
    # trained to criterion (the table records it): the steps are a cap
    steps = "at most {} training steps" if table is not None and "reached_target" in table else "{} training steps"
    if {"n_layers", "d_model"} <= set(m):
        trained = f", {steps.format(m['steps'])}" if m.get("steps") else ""
        trained += f", {pe_lr_words(m)}" if pe_lr_words(m) else ""
        # sweeps that fill the same table with their own recipe (NoPE's deeper LM, a learning rate,
        # an algorithmic task's depth): each difference once, with the schemes or tasks that have it
        by_task = len({override(sweep, "task") for _, sweep in filling}) > 1
        differ: dict[str, list[str]] = {}
        for other_name, other in filling[1:]:
            o = other.get("model") or {}
            if not {"n_layers", "d_model"} <= set(o):
                continue
            shape = (o["n_layers"], o["d_model"])
            words = [f"{shape[0]}-layer, {shape[1]}-wide"] if shape != (m["n_layers"], m["d_model"]) else []
            words += [f"with {pe_lr_words(o) or 'the base lr'}"] if pe_lr_words(o) != pe_lr_words(m) else []
            if words:
                which = override(other, "task") if by_task else override(other, "pe")
                differ.setdefault(" ".join(words), []).append((which or other_name).replace(",", ", "))
        trained += "".join(f"; {', '.join(which)} {words}" for words, which in differ.items())
        model = f"{m['n_layers']}-layer, {m['d_model']}-wide model ({m.get('name', '?')}{trained})"
    else:
        model = "model"  # a suite recorded before model sizes were
    return {"seeds": f"{n} seed{'s' if n != 1 else ''}", "model": model}
