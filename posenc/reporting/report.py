"""One Markdown report of several runs and sweeps: their comparison, statistics, curves, tables
and plots, in a folder of its own (``report.md`` beside ``curves.png``)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from posenc.core.errors import UserError
from posenc.core.io import atomic_write_text
from posenc.engine.results import RunDir
from posenc.reporting.compare import load, runs_of, tables_of
from posenc.reporting.style import FORMATS, legend_outside, pyplot, save_figure, series_styles


def _md(table: pd.DataFrame) -> str:
    return table.to_markdown(index=False, floatfmt=".4g")


def plot_curves(runs: Sequence[Path], path: Path) -> bool:
    """Training and validation loss against step, one line per run (a colour and a line style
    each, a marker on validation points), one legend outside the data; False when nothing to plot."""
    plt = pyplot()

    fig, (train_ax, val_ax) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    styles = series_styles([(run.name, run.name) for run in runs])
    drawn = False
    for run in runs:
        records = RunDir(run).read_records()
        look = styles[run.name, run.name].kwargs()
        for ax, key in ((train_ax, "train_loss"), (val_ax, "val_loss")):
            points = [(r["step"], r[key]) for r in records if key in r]
            if points:
                ax.plot(*zip(*points), label=run.name[16:], **(look | ({} if key == "val_loss" else {"marker": None})))
                drawn = True
    if drawn:
        for ax, title in ((train_ax, "training loss"), (val_ax, "validation loss")):
            ax.set(title=title, xlabel="training step", ylabel="loss (nats per token)")
        legend_outside(fig, [train_ax, val_ax], title="run")
        save_figure(fig, path, dpi=110)
    else:
        plt.close(fig)
    return drawn


def write_report(inputs: Sequence[Path], out_dir: Path) -> Path:
    """Write ``out_dir/report.md`` (and ``curves.png``) for run and sweep directories."""
    if not inputs:
        raise UserError("nothing to report: give run directories or sweep directories")
    runs = [run for path in inputs for run in runs_of(Path(path))]  # checks every input first
    out_dir = Path(out_dir)
    lines = [
        "# posenc report",
        "",
        f"{len(runs)} runs from {len(inputs)} inputs, written {time.strftime('%Y-%m-%d %H:%M:%S')}.",
        "",
    ]
    lines += [f"- `{p}`" for p in inputs] + [""]

    finished = [r for r in runs if tables_of(r)]
    if len(finished) > 1:
        try:
            table, keys = load(finished)  # each run's main table
        except UserError:
            table = None
        if table is not None:
            lines += ["## Comparison", "", f"Joined on {', '.join(keys)}.", "", _md(table), ""]

    for path in map(Path, inputs):
        if (path / "stats.csv").exists():
            lines += [
                f"## Sweep {path.name}",
                "",
                "Jobs and their status:",
                "",
                _md(pd.read_csv(path / "runs.csv", keep_default_na=False).drop(columns=["run_dir"], errors="ignore")),
                "",
                "Runs that differ only by seed (95% interval from the t distribution):",
                "",
                _md(pd.read_csv(path / "stats.csv")),
                "",
            ]

    if plot_curves(runs, out_dir / "curves.png"):
        lines += ["## Training curves", "", "![training and validation loss](curves.png)", ""]

    lines += ["## Runs", ""]
    for run in runs:
        summary = RunDir(run).read_summary()
        config = RunDir(run).read_config()
        choices = ", ".join(f"{g}={v}" for g, v in config.get("choices", {}).items() if v)
        lines += [
            f"### {run.name}",
            "",
            f"`{run}` — status **{summary.get('status')}**" + (f": {summary['error']}" if summary.get("error") else ""),
            "",
            f"{choices}, seed={config.get('seed')}",
            "",
        ]
        names = tables_of(run)  # every table the run's protocol declared and wrote, its main one first
        for name in names:
            heading = [f"Table `{name}`:", ""] if len(names) > 1 else []
            lines += [*heading, _md(pd.read_csv(run / f"{name}.csv")), ""]
        for figure in sorted(f for fmt in FORMATS for f in run.rglob(f"*.{fmt}")):  # plots.format
            lines += [f"![{figure.stem}]({os.path.relpath(figure, out_dir)})", ""]
    report = out_dir / "report.md"
    atomic_write_text(report, "\n".join(lines))
    return report
