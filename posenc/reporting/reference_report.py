"""results/REPORT.md: the claims (``posenc.reporting.claims``) and the published findings
(``posenc.reporting.findings``) of one reference suite, with the suite's tables, plots
(``posenc.reporting.plots``) and record (``suite.json``) in ``suite/``, from which
``posenc suite --report-from results/suite`` writes the report again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from posenc.core.errors import UserError
from posenc.core.io import atomic_write_text, replace_folder, write_json, write_table
from posenc.launch.suite import SUITE_FILE
from posenc.reporting.claims import CLAIMS
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
    return lines


SIZE_COLUMNS = ("model_size", "model.d_model", "params")  # a table's column for a scale sweep, preferred first
SAME_SIZE = 3.0  # parameter counts within this factor are one model size: schemes (a learned table, NoPE's
# deeper LM) add parameters to one architecture; a scale sweep's sizes lie several times apart (30× over 3)


def model_sizes(tables: Tables) -> tuple[str, list[tuple[str, list[Any]]]]:
    """The size column of a scale sweep and its sizes, smallest first, each as (label, the column's
    values it holds), or ("", []) when the tables hold one size. Parameter counts are grouped
    (``SAME_SIZE``): every row names its own model's count, and schemes differ by a few tables."""
    for column in SIZE_COLUMNS:
        values = sorted({v for t in tables.values() if column in t for v in t[column].dropna().unique()})
        if len(values) < 2:
            continue
        if column != "params":
            return column, [(f"{column} {v:g}" if isinstance(v, float) else f"{column} {v}", [v]) for v in values]
        groups: list[list[Any]] = []
        for v in values:
            if groups and float(v) <= SAME_SIZE * float(groups[-1][0]):
                groups[-1].append(v)
            else:
                groups.append([v])
        if len(groups) > 1:
            return column, [
                (f"params {_count(g[0])}–{_count(g[-1])}" if len(g) > 1 else f"params {_count(g[0])}", g)
                for g in groups
            ]
    return "", []


def _count(n: Any) -> str:
    n = float(n)
    return f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}k" if n >= 1e3 else f"{n:g}"


def of_size(tables: Tables, column: str, values: list[Any]) -> Tables:
    """Every table's rows of one model size (a table without the column is kept whole)."""
    return {k: t[t[column].isin(values)] if column in t else t for k, t in tables.items()}


def sections(functions: Any, tables: Tables, meta: dict[str, Any]) -> list[Section]:
    """Each section; in a scale sweep, one per model size, each family named with its size (a
    section that reads no table of the sweep, and so is the same at every size, once)."""
    column, sizes = model_sizes(tables)
    if not sizes:
        return [f(tables, meta) for f in functions]
    out = []
    for f in functions:
        per_size = [(label, f(of_size(tables, column, values), meta)) for label, values in sizes]
        if len({s.text() for _, s in per_size}) == 1:
            out.append(per_size[0][1])
            continue
        for label, s in per_size:
            s.key = f"{s.key} ({label})"
            for family in s.families:
                family.model = label + (f": {family.model}" if family.model else "")
                family.name = f"{family.name} ({label})"
            out.append(s)
    return out


def verdict_lines(done: list[Section], tables: Tables) -> list[str]:
    """The verdict table: per family of tests its verdict, its tests, the correction, n (seeds and
    items), the minimum detectable effects and the model; in a scale sweep, whether each verdict
    moves with the model's size."""
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
        }
        for s in done
        for f in s.families
    ]
    if not rows:
        return []
    lines = [
        "## Verdicts",
        "",
        "Every verdict is a family of tests on paired-by-seed differences (paired t for a claimed difference, "
        "TOST for a claimed equivalence within the margin `configs/findings.yaml` declares, a one-sided test "
        "against the margin for ≲), corrected together: **agrees** when every test shows the published "
        "relation, **disagrees** when any shows its opposite (the other sign, or a difference beyond the "
        "margin), **inconclusive** otherwise. The detectable effect is the smallest difference each test "
        "finds with power 0.8 at its n and the corrected level α/m (for TOST: the smallest margin it can "
        "show when the true difference is 0); each section lists its tests, beside the paper's own effect "
        "where the paper gives one.",
        "",
        md(pd.DataFrame(rows)),
        "",
    ]
    _, sizes = model_sizes(tables)
    if sizes:
        by_name: dict[str, dict[Any, str]] = {}
        for s in done:
            for f in s.families:
                label = next((lb for lb, _ in sizes if f.name.endswith(f" ({lb})")), None)
                if label is not None:
                    by_name.setdefault(f.name[: -len(label) - 3], {})[label] = f.verdict
        for name, verdicts in by_name.items():
            moves = len(set(verdicts.values())) > 1
            lines.append(
                f"- {name}: {'moves with scale' if moves else 'the same at every size'} — "
                + "; ".join(f"{k} {v}" for k, v in verdicts.items())
                + "."
            )
        lines.append("")
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
    """The report's Markdown (plots are referenced as ``suite/*.png``)."""
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
    claims, findings = sections(CLAIMS, tables, meta), sections(FINDINGS, tables, meta)
    lines += verdict_lines(claims + findings, tables)
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

    def fill(folder: Path) -> None:
        for name, table in tables.items():
            write_table(table, folder, name)
        for name, metric in ((TEXT.name, "bpb"), (PASSKEY.name, "accuracy")):
            t = ext_table(tables, name)
            if t is not None:
                plot_extrapolation(t, metric, folder / f"{name}.png")
        for name in (RESOLUTION.name, RELATIONAL.name):
            r = present(tables, name)
            if r is not None:
                plot_resolution(r, folder / f"{name}.png")
        o = order_rows(tables)
        if o is not None:
            plot_order(o, folder / "order.png")
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
