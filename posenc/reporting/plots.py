"""The report's plots: bits per byte (or accuracy) against length, accuracy against resolution,
and the order test; each a mean over seeds with its 95% interval (accuracies: bounded, as in
``posenc.reporting.estimates``), saved atomically."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from posenc.reporting.claims import TOL
from posenc.reporting.estimates import accuracy, select
from posenc.reporting.style import pyplot, save_figure
from posenc.reporting.tables import lengths, moves_grid, pixels, scorer, unscaled


def plot_extrapolation(t: pd.DataFrame, metric: str, path: Path) -> None:
    plt = pyplot()

    ns = lengths(t)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    cells = list(dict.fromkeys(zip(t["pe"], t["scale"])))
    plain = set(unscaled(t["scale"].unique()))
    palette = plt.get_cmap("tab10" if len(cells) <= 10 else "tab20")
    for i, (pe, scale) in enumerate(cells):
        part = select(t, pe=pe, scale=scale, metric=metric)
        est = [scorer(metric)(part, n) for n in ns]
        xs = [int(n) for n, e in zip(ns, est) if e.n]
        if not xs:
            continue
        es = [e for e in est if e.n]
        colour = palette(i % palette.N)
        ax.plot(
            xs,
            [e.mean for e in es],
            marker="o",
            color=colour,
            label=f"{pe}/{scale}",
            linestyle="-" if scale in plain else "--",
        )
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
    plt = pyplot()

    cols, steps = pixels(r), sorted(int(x) for x in r["finetune_steps"].dropna().unique())
    xs = [int(c[:-2]) for c in cols]
    fig, axes = plt.subplots(1, len(steps), figsize=(6.5 * len(steps), 4.5), sharey=True, squeeze=False)
    colours = {pe: plt.get_cmap("tab10")(i % 10) for i, pe in enumerate(r["pe"].unique())}
    for ax, ft in zip(axes[0], steps):
        for (pe, method), part in r[r["finetune_steps"] == ft].groupby(["pe", "method"], sort=False):
            est = [accuracy(part, c) for c in cols]
            ax.plot(
                xs,
                [e.mean for e in est],
                marker="o",
                color=colours[pe],
                label=f"{pe} / {method}",
                linestyle="-" if moves_grid(method) or method == "none" else "--",
            )
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
    plt = pyplot()

    groups = list(t.groupby(["model", "attention", "pe"], sort=False))
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.2 * len(groups)), 4.5))
    for i, phase in enumerate(("init", "trained")):
        xs = [j + (i - 0.5) * 0.4 for j in range(len(groups))]
        res = [float(g[g["phase"] == phase]["equivariance_residual"].max()) for _, g in groups]
        acc = [accuracy(g, "accuracy", phase=phase) for _, g in groups]
        axes[0].bar(xs, [max(v, 1e-12) for v in res], 0.4, label=phase)
        axes[1].bar(
            xs,
            [e.mean for e in acc],
            0.4,
            label=phase,
            yerr=[
                [e.mean - e.low if not math.isnan(e.low) else 0 for e in acc],
                [e.high - e.mean if not math.isnan(e.high) else 0 for e in acc],
            ],
        )
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
