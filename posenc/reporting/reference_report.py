"""results/REPORT.md: the claims (``posenc.reporting.claims``) and the published findings
(``posenc.reporting.findings``) of one reference suite, with the suite's tables and plots in ``suite/``."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pandas as pd

from posenc.reporting.claims import CLAIMS, TOL, Tables, completed, estimate, ext_table, lengths, md, order_rows, pixels, select
from posenc.reporting.findings import FINDINGS
from posenc.core.io import atomic_write_text, replace_folder, save_figure, write_table


# --- plots ---------------------------------------------------------------------------------------

def plot_extrapolation(t: pd.DataFrame, metric: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = lengths(t)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    cells = list(dict.fromkeys(zip(t["pe"], t["scale"])))
    palette = plt.get_cmap("tab10" if len(cells) <= 10 else "tab20")
    for i, (pe, scale) in enumerate(cells):
        part = select(t, pe=pe, scale=scale, metric=metric)
        est = [estimate(part, n) for n in ns]
        xs = [int(n) for n, e in zip(ns, est) if e.n]
        if not xs:
            continue
        es = [e for e in est if e.n]
        colour = palette(i % palette.N)
        ax.plot(xs, [e.mean for e in es], marker="o", color=colour, label=f"{pe}/{scale}",
                linestyle="-" if scale == "none" else "--")
        if all(not math.isnan(e.low) for e in es):
            ax.fill_between(xs, [e.low for e in es], [e.high for e in es], color=colour, alpha=0.15)
    ax.axvline(int(ns[0]), color="grey", linestyle=":", label="train length")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("evaluated length (tokens)")
    ax.set_ylabel({"bpb": "bits per byte", "accuracy": "answer accuracy"}.get(metric, metric))
    ax.set_title("mean over seeds, band: 95% interval", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


def plot_resolution(r: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols, steps = pixels(r), sorted(int(x) for x in r["finetune_steps"].dropna().unique())
    xs = [int(c[:-2]) for c in cols]
    fig, axes = plt.subplots(1, len(steps), figsize=(6.5 * len(steps), 4.5), sharey=True, squeeze=False)
    colours = {pe: plt.get_cmap("tab10")(i % 10) for i, pe in enumerate(r["pe"].unique())}
    for ax, ft in zip(axes[0], steps):
        for (pe, method), part in r[r["finetune_steps"] == ft].groupby(["pe", "method"], sort=False):
            est = [estimate(part, c) for c in cols]
            ax.plot(xs, [e.mean for e in est], marker="o", color=colours[pe], label=f"{pe} / {method}",
                    linestyle="--" if method in ("extrapolate", "clip") else "-")
            if all(not math.isnan(e.low) for e in est):
                ax.fill_between(xs, [e.low for e in est], [e.high for e in est], color=colours[pe], alpha=0.1)
        ax.set_title("no fine-tune" if ft == 0 else f"after {ft} fine-tune steps", fontsize=10)
        ax.set_xlabel("evaluation resolution (px)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy (mean over seeds, band: 95% interval)")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    save_figure(fig, path)


def plot_order(t: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(t.groupby(["model", "attention", "pe"], sort=False))
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.2 * len(groups)), 4.5))
    for i, phase in enumerate(("init", "trained")):
        xs = [j + (i - 0.5) * 0.4 for j in range(len(groups))]
        res = [float(g[g["phase"] == phase]["equivariance_residual"].max()) for _, g in groups]
        acc = [estimate(g, "accuracy", phase=phase) for _, g in groups]
        axes[0].bar(xs, [max(v, 1e-12) for v in res], 0.4, label=phase)
        axes[1].bar(xs, [e.mean for e in acc], 0.4, label=phase,
                    yerr=[[e.mean - e.low if not math.isnan(e.low) else 0 for e in acc],
                          [e.high - e.mean if not math.isnan(e.high) else 0 for e in acc]])
    axes[0].set_yscale("log")
    axes[0].axhline(TOL, color="k", ls="--", lw=1, label=f"tolerance {TOL:g}")
    axes[0].set_title("permutation residual (max over seeds)", fontsize=9)
    axes[1].axhline(float(t["chance_95"].max()), color="grey", ls=":", lw=1, label="chance, 95% bound")
    axes[1].set_title("order-task accuracy (mean, 95% interval)", fontsize=9)
    labels = [f"{pe}\n{att}\n{model}" for (model, att, pe), _ in groups]
    for ax in axes:
        ax.set_xticks(range(len(groups)), labels, fontsize=7)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


# --- the report ----------------------------------------------------------------------------------

def _meta_lines(meta: dict[str, Any]) -> list[str]:
    m = meta.get("machine", {})
    seconds = meta.get("seconds")
    took = f"{seconds / 60:.1f} min" if isinstance(seconds, (int, float)) else "unknown time"
    lines = [f"Suite `{meta.get('suite', '?')}` ({meta.get('description', '')}), seeds {meta.get('seeds')}, launcher "
             f"`{meta.get('launcher')}`: {took} on {m.get('cpus', '?')} CPU cores ({m.get('machine', '?')}"
             f"{', ' + m['cuda'] if m.get('cuda') else ''}), torch {m.get('torch', '?')}, Python {m.get('python', '?')}; "
             f"created {meta.get('created', '?')}.", ""]
    sweeps = meta.get("sweeps", {})
    if sweeps:
        rows = [{"sweep": k, "jobs": v.get("jobs"), "minutes": f"{v['seconds'] / 60:.1f}" if v.get("seconds") else "—",
                 "what": v.get("description", "")} for k, v in sweeps.items()]
        lines += [md(pd.DataFrame(rows)), ""]
    return lines


def render(tables: Tables, meta: dict[str, Any]) -> str:
    """The report's Markdown (plots are referenced as ``suite/*.png``)."""
    lines = ["# posenc reference report", "",
             "Generated by `posenc suite` from the tables in `suite/`; every number is the mean over seeds with its "
             "95% Student-t interval in brackets (one seed: the value alone). Verdicts are computed from the intervals.",
             "", *_meta_lines(meta), "## The seed document's claims", ""]
    lines += [f(tables).text() for f in CLAIMS]
    lines += ["## Beside the published findings", ""]
    lines += [f(tables).text() for f in FINDINGS]
    return "\n".join(lines)


def write_report(tables: Tables, meta: dict[str, Any], out: Path) -> Path:
    """``out/REPORT.md`` and ``out/suite/`` (every table as CSV and Markdown, the plots); the
    folder is replaced whole, so a crash leaves the previous report's tables or the new ones."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def fill(folder: Path) -> None:
        for name, table in tables.items():
            write_table(table, folder, name)
        for name in ("extrapolation_text", "extrapolation_passkey"):
            t = ext_table(tables, name)
            if t is not None:
                plot_extrapolation(t, "bpb" if name.endswith("text") else "accuracy", folder / f"{name}.png")
        r = completed(tables.get("resolution"))
        if r is not None and len(r):
            plot_resolution(r, folder / "resolution.png")
        o = order_rows(tables)
        if o is not None:
            plot_order(o, folder / "order.png")
        write_table(pd.DataFrame([{"key": k, "value": str(v)} for k, v in meta.items() if k != "sweeps"]), folder, "suite")

    replace_folder(out / "suite", fill)
    report = out / "REPORT.md"
    atomic_write_text(report, render(tables, meta) + f"\n\n---\nWritten {time.strftime('%Y-%m-%d %H:%M:%S')}.\n")
    return report

