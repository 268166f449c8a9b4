"""The one place plots are drawn from: matplotlib without a display, one look, atomic PNGs.

Every figure posenc writes (a run's plots, the report's) comes from ``pyplot()`` and goes out
through ``save_figure``, so the backend is chosen once and all figures share a style.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from posenc.core.io import atomic_write_bytes

STYLE = {
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "font.size": 9,
}


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display), with posenc's style."""
    import matplotlib

    if matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    return plt


def save_figure(fig: Any, path: Path, dpi: int = 120, tight: bool = False) -> Path:
    """Save a matplotlib figure as PNG atomically and close it (``tight``: trim the margins)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    pyplot().close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())
    return Path(path)
