"""results/REPORT.md: the claims (``posenc.reporting.claims``) and the published findings
(``posenc.reporting.findings``) of one reference suite, with the suite's tables, plots
(``posenc.reporting.plots``) and record (``suite.json``) in ``suite/``, from which
``posenc suite --report-from results/suite`` writes the report again."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from posenc.core.errors import UserError
from posenc.core.io import atomic_write_text, replace_folder, write_json, write_table
from posenc.launch.suite import SUITE_FILE
from posenc.reporting.claims import CLAIMS
from posenc.reporting.estimates import Family
from posenc.reporting.findings import FINDINGS
from posenc.reporting.plots import plot_extrapolation, plot_order, plot_resolution
from posenc.reporting.tables import (
    PASSKEY,
    RELATIONAL,
    REPORT_TABLES,
    RESOLUTION,
    TEXT,
    Section,
    Tables,
    check_tables,
    controls,
    did_not_learn,
    ext_table,
    filled_tables,
    md,
    order_rows,
    present,
    report_format,
)

# --- the report ----------------------------------------------------------------------------------


def _meta_lines(meta: dict[str, Any]) -> list[str]:
    m = meta.get("machine", {})
    seconds = meta.get("seconds")
    took = f"{seconds / 60:.1f} min" if isinstance(seconds, (int, float)) else "unknown time"
    lines = [
        f"Suite `{meta.get('suite', '?')}` ({meta.get('description', '')}), seeds {meta.get('seeds')}, launcher "
        f"`{meta.get('launcher')}`: {took} on {m.get('cpus', '?')} CPU cores ({m.get('machine', '?')}"
        f"{', ' + m['cuda'] if m.get('cuda') else ''}), torch {m.get('torch', '?')}, Python {m.get('python', '?')}; "
        f"created {meta.get('created', '?')}.",
        "",
    ]
    sweeps = meta.get("sweeps", {})
    if sweeps:
        rows = [
            {
                "sweep": k,
                "jobs": v.get("jobs"),
                "minutes": f"{v['seconds'] / 60:.1f}" if v.get("seconds") else "—",
                "what": v.get("description", ""),
            }
            for k, v in sweeps.items()
        ]
        lines += [md(pd.DataFrame(rows)), ""]
    if left := sorted(meta.get("left_out") or {}):
        names = ", ".join(f"`{name}`" for name in left)
        lines += [f"Not run (left out of this run with `--only`; what they would read is missing below): {names}.", ""]
    return lines


SIZE_COLUMN = "params"  # every extrapolation row names its model's parameter count
SAME_SIZE = 3.0  # parameter counts within this factor are one model size: schemes (a learned table, NoPE's
# deeper LM) add parameters to one architecture; a scale sweep's sizes lie several times apart (37× over 3)


def size_groups(counts: Iterable[Any]) -> list[list[Any]]:
    """Parameter counts grouped into model sizes (``SAME_SIZE`` apart at least), smallest first."""
    groups: list[list[Any]] = []
    for v in sorted(set(counts)):
        if groups and float(v) <= SAME_SIZE * float(groups[-1][0]):
            groups[-1].append(v)
        else:
            groups.append([v])
    return groups


def _count(n: Any) -> str:
    n = float(n)
    return f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}k" if n >= 1e3 else f"{n:g}"


def _one_size(count: Any, groups: list[list[Any]]) -> bool:
    """Whether a parameter count falls in one of the size groups."""
    return any(float(g[0]) / SAME_SIZE <= float(count) <= SAME_SIZE * float(g[0]) for g in groups)


def variants(tables: Tables) -> list[tuple[str, Tables]]:
    """The readings of the report's sections under another training budget or model size: each
    as (label, the tables its sections read), from the tables that stand for another
    (``ReportTable.reads_as``). A budget variant reads its tables in place of the
    trained-to-criterion ones. A size variant pools the scale sweep's rows with the main table's
    rows of the same schemes at a size the sweep lacks (the fixed-factor fine-tunes of the middle
    size are the main table's), then splits them by model size."""
    out = []
    budget = {t.reads_as: tables[t.name] for t in REPORT_TABLES if t.varies == "budget" and t.name in tables}
    if budget:
        steps = ", ".join(
            f"{name.removeprefix('extrapolation_')} {int(t['steps'].max())} steps"
            for name, t in budget.items()
            if "steps" in t and t["steps"].notna().any()
        )
        out.append((f"fixed budget ({steps})" if steps else "fixed budget", budget))
    pooled: Tables = {}
    for t in REPORT_TABLES:
        if t.varies != "size" or t.name not in tables or SIZE_COLUMN not in tables[t.name]:
            continue
        rows, main = tables[t.name], tables.get(t.reads_as)
        if main is not None and SIZE_COLUMN in main:
            mine = size_groups(rows[SIZE_COLUMN].dropna())
            extra = main[main["pe"].isin(set(rows["pe"]))]
            extra = extra[~extra[SIZE_COLUMN].map(lambda v: _one_size(v, mine))]
            rows = pd.concat([rows, extra], ignore_index=True)
        pooled[t.reads_as] = rows
    if pooled:
        groups = size_groups(pd.concat([t[SIZE_COLUMN] for t in pooled.values()]).dropna())
        if len(groups) > 1:
            for g in groups:
                # a size's own columns only: the lengths another size was scored at are not its own
                view = {name: t[t[SIZE_COLUMN].isin(g)].dropna(axis=1, how="all") for name, t in pooled.items()}
                out.append((f"{_count(min(g))} params", {k: v for k, v in view.items() if len(v)}))
    return out


def read_variants(functions: Iterable[Any], tables: Tables, meta: dict[str, Any]) -> list[tuple[str, list[Family]]]:
    """(label, the families of every section) for each variant; a family names its variant as its model."""
    out = []
    for label, view in variants(tables):
        families = [f for fn in functions for f in fn(view, meta).families]
        for f in families:
            f.model = label
        out.append((label, families))
    return out


def verdict_lines(done: list[Section], readings: list[tuple[str, list[Family]]]) -> list[str]:
    """The verdict table: per family of tests its verdict, its tests, the correction, n (seeds and
    items), the minimum detectable effects and the model, with its verdict at every other model size
    and budget the suite read it under (``read_variants``)."""
    elsewhere: dict[str, list[str]] = {}
    for label, families in readings:
        for f in families:
            elsewhere.setdefault(f.name, []).append(f"{label}: {f.verdict}")
    rows = [
        {
            "claim or finding": f.name,
            "verdict": f.verdict,
            "tests": f.counts(),
            "test": f.kinds(),
            "correction": f.correction_words(),
            "seeds": f.seeds(),
            "items": f.items(),
            "detectable effect (power 0.8)": f.mde_range(),
            "model": f.model or "—",
            "other sizes and budgets": "; ".join(elsewhere.get(f.name, [])) or "—",
        }
        for s in done
        for f in s.families
    ]
    if not rows:
        return []
    return [
        "## Verdicts",
        "",
        "Every verdict is a family of tests on paired-by-seed differences (paired t for a claimed difference, "
        "TOST for a claimed equivalence within the margin `configs/findings.yaml` declares, a one-sided test "
        "against the margin for ≲), corrected together: **agrees** when every test shows the published "
        "relation, **disagrees** when any shows its opposite (the other sign, or a difference beyond the "
        "margin), **inconclusive** otherwise. The detectable effect is the smallest difference each test "
        "finds with power 0.8 at its n and the corrected level α/m (for TOST: the smallest margin it can "
        "show when the true difference is 0); each section lists its tests, beside the paper's own effect "
        "where the paper gives one. The last column is the same family read at the scale sweep's model "
        "sizes and under the fixed budget (Model size and training budget, below).",
        "",
        md(pd.DataFrame(rows)),
        "",
    ]


def variant_lines(readings: list[tuple[str, list[Family]]]) -> list[str]:
    """The families read under each variant: one table of verdicts, whether each moves with the
    model's size, and every test."""
    if not readings:
        return []
    names = list(dict.fromkeys(f.name for _, families in readings for f in families))
    by = {(label, f.name): f for label, families in readings for f in families}
    rows = []
    for name in names:
        row = {"claim or finding": name}
        for label, _ in readings:
            f = by.get((label, name))
            row[label] = f"{f.verdict} ({f.counts()}; detectable {f.mde_range()})" if f else "—"
        rows.append(row)
    lines = [
        "## Model size and training budget",
        "",
        "The sections that read the length-extrapolation tables, read again at each model size of the scale "
        "sweep (the same schemes, recipe, target and seeds at every size: `suite/extrapolation_text_scale.csv`, "
        "`suite/extrapolation_target_scale.csv`) and under a fixed training budget (every scheme the same "
        "steps, no target: `suite/*_fixed.csv`), so that each verdict says whether it moves with the model's "
        "size or with how long the models train. Each cell: the verdict, its tests, their detectable effects.",
        "",
        md(pd.DataFrame(rows)),
        "",
    ]
    sizes = [label for label, _ in readings if label.endswith(" params")]
    for name in names:
        verdicts = {label: by[(label, name)].verdict for label in sizes if (label, name) in by}
        if len(verdicts) > 1:
            moves = len(set(verdicts.values())) > 1
            lines.append(
                f"- {name}: {'moves with scale' if moves else 'the same at every size'} — "
                + "; ".join(f"{k} {v}" for k, v in verdicts.items())
                + "."
            )
    lines.append("")
    for label, families in readings:
        lines += [f"### {label}", ""]
        for f in families:
            lines += [f"**{f.name}:** {f.verdict} ({f.counts()}; {f.correction_words()})", "", *f.lines(), ""]
    return lines


def _split_lines(tables: Tables) -> list[str]:
    """A line naming the held-out tables that predate the test split (no ``split`` column): their
    numbers come from the validation split that stopped training."""
    held_out = [t.name for t in REPORT_TABLES if t.experiment != "check" and t.source != "similarity"]
    old = [n for n in held_out if isinstance(tables.get(n), pd.DataFrame) and "split" not in tables[n].columns]
    if not old:
        return []
    return [
        f"**Validation numbers.** These tables predate the held-out test split, so they report the validation "
        f"split that also stopped training (an optimistic reading at the training length): {', '.join(old)}. "
        "Rerun their sweeps for test-split numbers.",
        "",
    ]


def render(tables: Tables, meta: dict[str, Any]) -> str:
    """The report's Markdown (plots are referenced as ``suite/*.<format>``, ``report_format``)."""
    lines = [
        "# posenc reference report",
        "",
        "Generated by `posenc suite` from the tables in `suite/`; every number is the mean over seeds with its 95% "
        "interval in brackets and the number of seeds n (one seed: the value alone). Losses, bits per byte and "
        "other unbounded measures take the Student-t interval. Accuracies take an interval inside [0, 1]: the t "
        "interval of the mean logit over seeds, mapped back with the logistic function (where the table records "
        "the evaluation items per seed, each accuracy enters as the empirical logit log((k + ½)/(n − k + ½)), and the "
        "interval also spans the Wilson interval of the items pooled over seeds); "
        "where a seed scores exactly 0 or 1 and the items are not recorded, the percentile bootstrap of the mean "
        'over seeds, and the line says so ("items unknown: bootstrap over seeds"); where they are, n gives them '
        '("n=5, 512 items"). Tables with a `split` column are read on their test split. Comparisons between '
        "schemes, scalings or methods are paired by seed: the t interval of the per-seed differences (for "
        "accuracies within what the base allows, [−b, 1 − b] for a − b), and every verdict is a test corrected "
        "within its family (see Verdicts).",
        "",
        *_split_lines(tables),
        *_meta_lines(meta),
    ]
    under, expected = did_not_learn(tables, controls(meta))
    if under:
        lines += [
            "## Models under their training target",
            "",
            "Runs whose model did not reach its training target (`reached_target` false: did not learn). The "
            "extrapolation and resolution readings leave them out of every average, and their comparisons pair "
            "only the seeds that learned; the ViT ablation and the order test read every model, since whether "
            "a scheme can learn the task is what they measure.",
            "",
            *under,
            "",
        ]
    if expected:
        lines += [
            "### Controls",
            "",
            "Schemes that cannot learn a sweep's label by construction, named as controls in the suite's file "
            "(`controls:`), each with the reason; they run to their step cap, and the tests of C1 and the ViT "
            "ablation read them. A control that reached its target would contradict its reason.",
            "",
            *expected,
            "",
        ]
    claims, findings = [f(tables, meta) for f in CLAIMS], [f(tables, meta) for f in FINDINGS]
    readings = read_variants((*CLAIMS, *FINDINGS), tables, meta)
    lines += verdict_lines(claims + findings, readings)
    lines += variant_lines(readings)
    lines += ["## The seed document's claims", ""]
    lines += [s.text() for s in claims]
    lines += [
        "## Beside the published findings",
        "",
        "Each paper's statement, figures, effects and the equivalence margins of its verdict are in "
        "`configs/findings.yaml`.",
        "",
    ]
    lines += [s.text() for s in findings]
    return "\n".join(lines)


def write_report(tables: Tables, meta: dict[str, Any], out: Path) -> Path:
    """``out/REPORT.md`` and ``out/suite/`` (every table as CSV and Markdown, the plots, and the
    suite's record ``suite.json`` naming its tables, so that ``collect`` reads the folder back);
    the folder is replaced whole, so a crash leaves the previous report's tables or the new ones.

    A table the report reads that no sweep filled and no ``--only`` left out stops it first, in
    one line (``check_tables``), as does a suite that fills none of them."""
    if not check_tables(*filled_tables(tables, meta)):
        raise UserError("no reference report: the suite fills none of the tables it reads")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    fmt = report_format(meta)

    def fill(folder: Path) -> None:
        for name, table in tables.items():
            write_table(table, folder, name)
        for name, metric in ((TEXT.name, "bpb"), (PASSKEY.name, "accuracy")):
            t = ext_table(tables, name)
            if t is not None:
                plot_extrapolation(t, metric, folder / f"{name}.{fmt}")
        for name in (RESOLUTION.name, RELATIONAL.name):
            r = present(tables, name)
            if r is not None:
                plot_resolution(r, folder / f"{name}.{fmt}")
        o = order_rows(tables)
        if o is not None:
            plot_order(o, folder / f"order.{fmt}")
        write_table(
            pd.DataFrame([{"key": k, "value": str(v)} for k, v in meta.items() if k not in ("sweeps", "tables")]),
            folder,
            "suite",
        )
        write_json(folder / SUITE_FILE, {**meta, "tables": sorted(tables)})

    replace_folder(out / "suite", fill)
    report = out / "REPORT.md"
    atomic_write_text(report, render(tables, meta) + f"\n\n---\nWritten {time.strftime('%Y-%m-%d %H:%M:%S')}.\n")
    return report
