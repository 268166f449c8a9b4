"""The protocol's figures: the metric against length, loss against position, accuracy by depth."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from posenc.reporting.style import pyplot, save_figure


def plot(table: pd.DataFrame, per_position: pd.DataFrame, metric: str, train_len: int, folder: Path) -> list[Path]:
    """``length.png`` (the metric against evaluated length, log x) and ``per_position.png``
    (bucketed loss against position at the longest length); fine-tuned rows dashed."""
    plt = pyplot()

    def save(fig, ax, name: str, xlabel: str, ylabel: str) -> Path:
        ax.axvline(train_len, color="grey", linestyle=":", label="train length")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        return save_figure(fig, folder / name)

    def label(pe: str, scale: str, ft: int) -> str:
        return f"{pe}/{scale}" + (f" +ft{ft}" if ft else "")

    cells = list(dict.fromkeys(zip(table.pe, table.scale)))
    palette = plt.get_cmap("tab10" if len(cells) <= 10 else "tab20")
    color = {cell: palette(i % palette.N) for i, cell in enumerate(cells)}  # one colour per cell in both plots
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lengths = [c for c in table.columns if c.isdigit()]
    for _, row in table[table.metric == metric].iterrows():
        ax.plot(
            [int(n) for n in lengths],
            [row[n] for n in lengths],
            "--" if row.finetune_steps else "-",
            marker="o",
            color=color[(row.pe, row.scale)],
            label=label(row.pe, row.scale, row.finetune_steps),
        )
    ax.set_xscale("log", base=2)
    ylabel = {"bpb": "bits per byte", "accuracy": "answer accuracy"}.get(metric, metric)
    paths = [save(fig, ax, "length.png", "evaluated length (tokens)", ylabel)]
    if len(per_position):
        longest = per_position.length.max()
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for (pe, scale, ft), part in per_position[per_position.length == longest].groupby(
            ["pe", "scale", "finetune_steps"]
        ):
            ax.plot(
                (part.start + part.end) / 2,
                part.bits,
                "--" if ft else "-",
                marker=".",
                color=color[(pe, scale)],
                label=label(pe, scale, ft),
            )
        paths.append(
            save(
                fig,
                ax,
                "per_position.png",
                f"position (bucket centre), evaluated at {longest} tokens",
                "loss (bits per token)",
            )
        )
    return paths


def plot_depth(depth: pd.DataFrame, folder: Path) -> Path:
    """``depth.png``: answer accuracy by depth (rows) and length (columns), one panel per cell."""
    plt = pyplot()

    lengths = [c for c in depth.columns if c.isdigit()]
    panels = list(depth.groupby(["pe", "scale", "finetune_steps"], sort=False))
    fig, axes = plt.subplots(1, len(panels), figsize=(2.2 + 2.2 * len(panels), 3.2), squeeze=False)
    for ax, ((pe, scale, ft), part) in zip(axes[0], panels):
        image = ax.imshow(part[lengths].to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(lengths)), lengths, rotation=45)
        ax.set_yticks(range(len(part)), [f"{d:g}" for d in part.depth] if ax is axes[0][0] else [])
        ax.set_title(f"{pe}/{scale}" + (f" +ft{ft}" if ft else ""), fontsize=9)
        ax.set_xlabel("length")
    axes[0][0].set_ylabel("depth of the key")
    fig.colorbar(image, ax=axes[0].tolist(), label="accuracy")
    return save_figure(fig, folder / "depth.png")
