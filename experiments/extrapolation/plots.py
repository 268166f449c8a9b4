"""The protocol's figures: the metric against length, loss against position, accuracy by depth.

A colour per scheme, a line style and marker per scale (``series_styles``), fine-tuned cells
drawn thinner with open markers; one panel per scheme past ``MAX_SERIES`` lines; legends outside
the data; files in ``fmt`` (``plots.format``: png, svg, pdf).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from posenc.reporting.style import (
    legend_outside,
    length_axis,
    panel_grid,
    pyplot,
    save_figure,
    series_styles,
    split_panels,
)


def _label(pe: str, scale: str, ft: int, panels: int) -> str:
    return (scale if panels > 1 else f"{pe} / {scale}") + (f" +ft{ft}" if ft else "")


def _look(style: Any, ft: int) -> dict[str, Any]:
    """A fine-tuned cell: its scale's style, open markers and a thinner line."""
    return style.kwargs() | ({"markerfacecolor": "white", "linewidth": 1.0} if ft else {})


def _lines(styles: dict, train_len: int, name: str, xlabel: str, ylabel: str, draw, folder, fmt):
    """One figure: a panel per group of ``split_panels`` (cells), each drawn by ``draw(ax, cell)``."""
    plt = pyplot()
    panels = split_panels(list(styles))
    fig, axes = panel_grid(plt, len(panels), sharex=True, sharey=True)
    for ax, cells in zip(axes, panels):
        for cell in cells:
            draw(ax, cell, len(panels))
        ax.axvline(train_len, color="grey", linestyle=":", linewidth=1, label="training length")
        ax.set_xlabel(xlabel)
        if len(panels) > 1:
            ax.set_title(cells[0][0], fontsize=9)
    axes[0].set_ylabel(ylabel)
    legend_outside(fig, axes, title="scale" if len(panels) > 1 else "scheme / scale", neutral=len(panels) > 1)
    return save_figure(fig, Path(folder) / f"{name}.{fmt}")


def plot(
    table: pd.DataFrame, per_position: pd.DataFrame, metric: str, train_len: int, folder: Path, fmt: str = "png"
) -> list[Path]:
    """``length.<fmt>`` (the metric against evaluated length in tokens, log 2) and
    ``per_position.<fmt>`` (bucketed loss against position at the longest length)."""
    styles = series_styles(list(dict.fromkeys(zip(table.pe, table.scale))))
    lengths = [c for c in table.columns if c.isdigit()]
    rows = table[table.metric == metric]

    def by_length(ax, cell, panels):
        for _, row in rows[(rows.pe == cell[0]) & (rows.scale == cell[1])].iterrows():
            look = _look(styles[cell], row.finetune_steps)
            label = _label(*cell, row.finetune_steps, panels)
            ax.plot([int(n) for n in lengths], [row[n] for n in lengths], label=label, **look)
        length_axis(ax)

    ylabel = {"bpb": "bits per byte", "accuracy": "answer accuracy"}.get(metric, metric)
    paths = [_lines(styles, train_len, "length", "evaluated length (tokens)", ylabel, by_length, folder, fmt)]
    if len(per_position):
        longest = per_position.length.max()
        at = per_position[per_position.length == longest]

        def by_position(ax, cell, panels):
            for ft, part in at[(at.pe == cell[0]) & (at.scale == cell[1])].groupby("finetune_steps"):
                look = _look(styles[cell], ft) | {"marker": None}  # many buckets: a line reads better
                ax.plot((part.start + part.end) / 2, part.bits, label=_label(*cell, ft, panels), **look)

        xlabel = f"position (tokens; bucket centre, evaluated at {longest} tokens)"
        paths.append(
            _lines(styles, train_len, "per_position", xlabel, "loss (bits per token)", by_position, folder, fmt)
        )
    return paths


def plot_depth(depth: pd.DataFrame, folder: Path, fmt: str = "png") -> Path:
    """``depth.<fmt>``: answer accuracy by depth (rows) and length (columns), one panel per cell."""
    plt = pyplot()

    lengths = [c for c in depth.columns if c.isdigit()]
    panels = list(depth.groupby(["pe", "scale", "finetune_steps"], sort=False))
    fig, axes = panel_grid(plt, len(panels), width=2.6, height=2.6, columns=4, sharey=True)
    for ax, ((pe, scale, ft), part) in zip(axes, panels):
        image = ax.imshow(part[lengths].to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(lengths)), lengths, rotation=45)
        ax.set_yticks(range(len(part)), [f"{d:g}" for d in part.depth])
        ax.set_title(f"{pe} / {scale}" + (f" +ft{ft}" if ft else ""), fontsize=9)
        ax.set_xlabel("length (tokens)")
        ax.grid(False)
    axes[0].set_ylabel("depth of the key (fraction of the context)")
    fig.colorbar(image, ax=axes, label="accuracy")
    return save_figure(fig, Path(folder) / f"depth.{fmt}")
