"""The one place plots are drawn from: matplotlib without a display, one look, atomic files.

Every figure posenc writes (a run's plots, the report's) comes from ``pyplot()`` and goes out
through ``save_figure`` in the format its file name ends with (``plots.format``: png, svg or pdf),
so the backend is chosen once and all figures share a style. A figure of several series gives
each scheme one colour and each method (a rescaling, an interpolation) one line style and one
marker (``series_styles``), so that series stay apart in print and in greyscale; past
``MAX_SERIES`` series it draws one panel per scheme (``split_panels``), and its legend sits
outside the data (``legend_outside``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posenc.core.errors import ConfigError
from posenc.core.io import atomic_write_bytes

STYLE = {
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "font.size": 9,
    "lines.linewidth": 1.4,
    "lines.markersize": 4.5,
    "svg.fonttype": "none",  # text stays text in an SVG (editable in a paper's figure)
    "pdf.fonttype": 42,  # TrueType in a PDF, as journals ask
}
FORMATS = ("png", "svg", "pdf")
MAX_SERIES = 8  # more in one panel and a reader cannot tell them apart: one panel per scheme

# Okabe & Ito's colour-blind-safe set (Wong, "Points of view: Color blindness", Nature Methods 2011),
# yellow last (faint on white), then Tol's muted set for schemes past eight
COLOURS = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#000000",
    "#F0E442",
    "#882255",
    "#44AA99",
    "#332288",
    "#999933",
    "#AA4499",
    "#888888",
)
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 1)), (0, (8, 2)), (0, (3, 1, 1, 1)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


@dataclass(frozen=True)
class SeriesStyle:
    """How one series is drawn: its scheme's colour, its method's line style and marker."""

    color: str
    linestyle: Any
    marker: str

    def kwargs(self) -> dict[str, Any]:
        return {"color": self.color, "linestyle": self.linestyle, "marker": self.marker}


def series_styles(series: Sequence[tuple[str, str]]) -> dict[tuple[str, str], SeriesStyle]:
    """A style per ``(scheme, method)``: colours by scheme and line styles and markers by method,
    each in order of first appearance, so two series never share a colour and a line style (up
    to 14 schemes x 8 methods; beyond, styles repeat, and ``split_panels`` has split them)."""
    schemes = list(dict.fromkeys(s for s, _ in series))
    methods = list(dict.fromkeys(m for _, m in series))
    return {
        (s, m): SeriesStyle(
            COLOURS[schemes.index(s) % len(COLOURS)],
            LINESTYLES[methods.index(m) % len(LINESTYLES)],
            MARKERS[methods.index(m) % len(MARKERS)],
        )
        for s, m in dict.fromkeys(series)
    }


def split_panels(series: Sequence[tuple[str, str]], most: int = MAX_SERIES) -> list[list[tuple[str, str]]]:
    """The series of each panel: all in one when there are at most ``most``, else one panel per
    scheme (small multiples, each with its scheme's methods)."""
    series = list(dict.fromkeys(series))
    if len(series) <= most:
        return [series]
    return [[x for x in series if x[0] == s] for s in dict.fromkeys(s for s, _ in series)]


def panel_grid(plt: Any, n: int, width: float = 4.2, height: float = 3.2, columns: int = 3, **kw: Any):
    """A figure of ``n`` panels, at most ``columns`` a row, constrained layout (room for a legend
    outside); returns the figure and the used axes in reading order (the rest are removed)."""
    cols = min(n, columns)
    rows = math.ceil(n / cols)
    fig, grid = plt.subplots(
        rows, cols, figsize=(width * cols + 2.0, height * rows), squeeze=False, layout="constrained", **kw
    )
    axes = [ax for row in grid for ax in row]
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n]


def legend_outside(fig: Any, axes: Sequence[Any], title: str | None = None, neutral: bool = False) -> None:
    """One legend for the figure, right of the panels: every labelled line once (``neutral``: in
    dark grey, for small multiples whose panels name the scheme and the legend only the style)."""
    from matplotlib.lines import Line2D

    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if neutral:
        handles = {
            label: Line2D([], [], color="0.25", linestyle=h.get_linestyle(), marker=h.get_marker())
            if isinstance(h, Line2D) and h.get_color() != "grey"
            else h
            for label, h in handles.items()
        }
    if handles:
        fig.legend(
            list(handles.values()), list(handles), loc="outside right upper", fontsize=7, title=title, title_fontsize=8
        )


def length_axis(ax: Any) -> None:
    """A log-2 axis of lengths with the lengths written out (64, 128, not 2⁶, 2⁷)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def figure_format(config: Mapping[str, Any] | None) -> str:
    """The file format of a run's figures: the config's ``plots.format`` (png when it has none);
    anything else is a ``ConfigError`` naming the formats."""
    plots = (config or {}).get("plots") or {}
    fmt = str(plots.get("format", "png")).lower()
    if fmt not in FORMATS:
        raise ConfigError(f"plots.format: unknown format '{plots.get('format')}'; valid: {', '.join(FORMATS)}")
    return fmt


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display), with posenc's style."""
    import matplotlib

    if matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    return plt


def save_figure(fig: Any, path: Path, dpi: int = 120, tight: bool = False) -> Path:
    """Save a matplotlib figure atomically in the format its name ends with (png, svg, pdf) and
    close it (``tight``: trim the margins)."""
    fmt = Path(path).suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise ValueError(f"cannot save a figure as '{path}': use {', '.join(FORMATS)}")
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {}  # the same figure gives the same bytes
    fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight" if tight else None, metadata=metadata or None)
    pyplot().close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())
    return Path(path)
