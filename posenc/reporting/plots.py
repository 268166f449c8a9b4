"""The report's plots: bits per byte (or accuracy) against length, accuracy against resolution,
and the order test; each a mean over seeds with its 95% interval (accuracies: bounded, as in
``posenc.reporting.estimates``), saved atomically."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from posenc.reporting.claims import TOL
from posenc.reporting.estimates import accuracy, select
from posenc.reporting.style import (
    COLOURS,
    legend_outside,
    length_axis,
    panel_grid,
    pyplot,
    save_figure,
    series_styles,
    split_panels,
)
from posenc.reporting.tables import lengths, pixels, scorer


def _band(ax: Any, xs: list[int], est: list, colour: str) -> None:
    if all(not math.isnan(e.low) for e in est):
        ax.fill_between(xs, [e.low for e in est], [e.high for e in est], color=colour, alpha=0.12, linewidth=0)


def plot_extrapolation(t: pd.DataFrame, metric: str, path: Path) -> None:
    """The metric against evaluated length (tokens, log 2), one line per scheme x scale: a colour
    per scheme, a line style and marker per scale; one panel per scheme past ``MAX_SERIES`` lines."""
    plt = pyplot()

    ns = lengths(t)
    series = list(dict.fromkeys(zip(t["pe"], t["scale"])))
    styles = series_styles(series)
    panels = split_panels(series)
    fig, axes = panel_grid(plt, len(panels), sharex=True, sharey=True)
    for ax, cells in zip(axes, panels):
        for pe, scale in cells:
            part = select(t, pe=pe, scale=scale, metric=metric)
            est = [(int(n), e) for n in ns if (e := scorer(metric)(part, n)).n]
            if not est:
                continue
            xs, es = [n for n, _ in est], [e for _, e in est]
            label = scale if len(panels) > 1 else f"{pe} / {scale}"
            ax.plot(xs, [e.mean for e in es], label=label, **styles[pe, scale].kwargs())
            _band(ax, xs, es, styles[pe, scale].color)
        ax.axvline(int(ns[0]), color="grey", linestyle=":", linewidth=1, label="training length")
        length_axis(ax)
        ax.set_xlabel("evaluated length (tokens)")
        if len(panels) > 1:
            ax.set_title(cells[0][0], fontsize=9)
    axes[0].set_ylabel({"bpb": "bits per byte", "accuracy": "answer accuracy"}.get(metric, metric))
    fig.suptitle("mean over seeds, band: 95% interval", fontsize=9)
    legend_outside(fig, axes, title="scale" if len(panels) > 1 else "scheme / scale", neutral=len(panels) > 1)
    save_figure(fig, path)


def plot_resolution(r: pd.DataFrame, path: Path) -> None:
    """Accuracy against evaluation resolution (pixels), one line per scheme x method, a column of
    panels per fine-tune budget (and a row per scheme past ``MAX_SERIES`` lines)."""
    plt = pyplot()

    cols, steps = pixels(r), sorted(int(x) for x in r["finetune_steps"].dropna().unique())
    xs = [int(c[:-2]) for c in cols]
    series = list(dict.fromkeys(zip(r["pe"], r["method"])))
    styles = series_styles(series)
    panels = [(ft, cells) for cells in split_panels(series) for ft in steps]
    fig, axes = panel_grid(plt, len(panels), columns=len(steps), sharex=True, sharey=True)
    for ax, (ft, cells) in zip(axes, panels):
        for pe, method in cells:
            part = r[(r["finetune_steps"] == ft) & (r["pe"] == pe) & (r["method"] == method)]
            if part.empty:
                continue
            est = [accuracy(part, c) for c in cols]
            label = method if len(panels) > len(steps) else f"{pe} / {method}"
            ax.plot(xs, [e.mean for e in est], label=label, **styles[pe, method].kwargs())
            _band(ax, xs, est, styles[pe, method].color)
        title = "no fine-tune" if ft == 0 else f"after {ft} fine-tune steps"
        ax.set_title(f"{cells[0][0]}, {title}" if len(panels) > len(steps) else title, fontsize=9)
        ax.set_xlabel("evaluation resolution (pixels)")
    for ax in axes[:: len(steps)]:
        ax.set_ylabel("accuracy")
    fig.suptitle("mean over seeds, band: 95% interval", fontsize=9)
    split = len(panels) > len(steps)
    legend_outside(fig, axes, title="method" if split else "scheme / method", neutral=split)
    save_figure(fig, path)


def plot_order(t: pd.DataFrame, path: Path) -> None:
    """Permutation residual and order-task accuracy per cell, at init and trained (a colour and
    a hatch per phase, so the bars stay apart in greyscale)."""
    plt = pyplot()

    groups = list(t.groupby(["model", "attention", "pe"], sort=False))
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.2 * len(groups)) + 1.5, 4.5), layout="constrained")
    for i, phase in enumerate(("init", "trained")):
        look = {"color": COLOURS[i], "hatch": "//" if i else None, "edgecolor": "white"}
        xs = [j + (i - 0.5) * 0.4 for j in range(len(groups))]
        res = [float(g[g["phase"] == phase]["equivariance_residual"].max()) for _, g in groups]
        acc = [accuracy(g, "accuracy", phase=phase) for _, g in groups]
        axes[0].bar(xs, [max(v, 1e-12) for v in res], 0.4, label=phase, **look)
        axes[1].bar(
            xs,
            [e.mean for e in acc],
            0.4,
            label=phase,
            **look,
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
    axes[0].set_ylabel("relative residual")
    axes[1].set_ylabel("accuracy")
    legend_outside(fig, axes)
    save_figure(fig, path)
