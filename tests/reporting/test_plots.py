"""Figures for papers: every series apart (a colour per scheme, a line style and marker per
method), small multiples past eight series, the legend outside the data, axes in units, and
files in each of plots.format's formats (before: learned/bilinear and learned/bicubic drew in
one colour and style, 15 series shared one legend over the data, PNG only)."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

import posenc.experiments.extrapolation.plots as run_plots
import posenc.reporting.plots as report_plots
from posenc.core.errors import ConfigError
from posenc.reporting.style import FORMATS, figure_format, series_styles, split_panels

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "svg": b"<?xml", "pdf": b"%PDF-"}


@pytest.fixture
def figures(monkeypatch):
    """What the plot functions save: each figure's panels, their lines, its legends and where
    they are, drawn (so the constrained layout has placed the legend) before it is saved."""
    import posenc.reporting.style as style

    saved = []
    real = style.save_figure

    def keep(fig, path, *args, **kw):
        fig.canvas.draw()
        axes = [ax for ax in fig.axes if ax.get_lines()]
        saved.append(
            {
                "axes": axes,
                "lines": [(ax.get_title(), line) for ax in axes for line in ax.get_lines()],
                "legends": [leg.get_window_extent() for leg in fig.legends],
                "right": max((ax.get_window_extent().x1 for ax in axes), default=None),
            }
        )
        return real(fig, path, *args, **kw)

    for module in (report_plots, run_plots):
        monkeypatch.setattr(module, "save_figure", keep)
    return saved


def assert_paper_figure(figure, panels: int, xlabel: str) -> None:
    series = {}  # (colour, line style) -> the series drawn so; a fine-tune is its cell's line, thinner
    for title, line in figure["lines"]:
        label = line.get_label().split(" +ft")[0]
        if not label.startswith(("_", "training length")):
            named = label if " / " in label else (title.split(",")[0], label)  # a panel per scheme: its title
            series.setdefault((line.get_color(), str(line.get_linestyle())), set()).add(named)
    assert series and all(len(drawn) == 1 for drawn in series.values()), series
    assert len(figure["axes"]) == panels
    # one legend, the figure's, right of every panel; no panel has one over its data
    assert len(figure["legends"]) == 1 and all(ax.get_legend() is None for ax in figure["axes"])
    assert figure["legends"][0].x0 >= figure["right"] - 1
    assert {ax.get_xlabel() for ax in figure["axes"]} == {xlabel}


def extrapolation_table(schemes, scales, seeds=(0, 1)) -> pd.DataFrame:
    rows = []
    for (i, pe), (j, scale), seed in itertools.product(enumerate(schemes), enumerate(scales), seeds):
        values = {str(n): 1.0 + i + 0.1 * j + 0.01 * seed + k / 10 for k, n in enumerate((16, 32, 64))}
        rows.append({"pe": pe, "scale": scale, "finetune_steps": 0, "seed": seed, "metric": "bpb", **values})
    return pd.DataFrame(rows)


def test_styles_give_a_colour_per_scheme_and_a_line_style_and_marker_per_method():
    series = list(itertools.product(["rope", "alibi", "learned"], ["none", "pi", "ntk", "yarn"]))
    styles = series_styles(series)
    assert len({(s.color, s.linestyle) for s in styles.values()}) == 12
    assert len({styles[pe, "pi"].color for pe in ("rope", "alibi", "learned")}) == 3
    assert {(styles[pe, "ntk"].linestyle, styles[pe, "ntk"].marker) for pe in ("rope", "alibi")} == {("-.", "^")}
    assert split_panels(series[:8]) == [series[:8]]
    assert split_panels(series) == [series[0:4], series[4:8], series[8:12]]  # one panel per scheme


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_run_figures_in_every_format_apart_and_with_the_legend_outside(tmp_path, figures, fmt):
    table = extrapolation_table(["rope", "alibi", "nope"], ["none", "pi", "yarn"], seeds=(0,))
    positions = pd.DataFrame(
        [
            {"pe": pe, "scale": sc, "finetune_steps": 0, "length": 64, "start": s, "end": s + 16, "bits": 1.0 + s / 64}
            for pe, sc in zip(table.pe, table.scale)
            for s in (0, 16, 32, 48)
        ]
    )
    paths = run_plots.plot(table, positions, "bpb", train_len=16, folder=tmp_path, fmt=fmt)
    assert [p.name for p in paths] == [f"length.{fmt}", f"per_position.{fmt}"]
    for path in paths:
        assert path.read_bytes().startswith(MAGIC[fmt])
    assert_paper_figure(figures[0], panels=3, xlabel="evaluated length (tokens)")  # nine series: a panel per scheme
    depth = table.assign(depth=0.5).drop(columns="metric")
    assert run_plots.plot_depth(depth, tmp_path, fmt).read_bytes().startswith(MAGIC[fmt])


def test_the_report_figures_keep_every_series_apart(tmp_path, figures):
    """The suite's 15 series of extrapolation_text (5 schemes x 3 scales): five panels, one a scheme."""
    table = extrapolation_table(["rope", "alibi", "nope", "learned", "sinusoidal"], ["none", "pi", "yarn"])
    report_plots.plot_extrapolation(table, "bpb", tmp_path / "extrapolation_text.svg")
    assert (tmp_path / "extrapolation_text.svg").read_bytes().startswith(MAGIC["svg"])
    assert_paper_figure(figures[-1], panels=5, xlabel="evaluated length (tokens)")
    # results/suite/resolution.png drew learned/bilinear and learned/bicubic alike
    rows = [
        {"pe": pe, "method": m, "finetune_steps": ft, "seed": seed, "16px": 0.5 + 0.1 * seed, "32px": 0.9}
        for pe, methods in (("learned", ("bilinear", "bicubic")), ("rope2d_axial", ("extrapolate", "interpolate")))
        for m in methods
        for ft in (0, 10)
        for seed in (0, 1)
    ]
    report_plots.plot_resolution(pd.DataFrame(rows), tmp_path / "resolution.pdf")
    assert (tmp_path / "resolution.pdf").read_bytes().startswith(MAGIC["pdf"])
    assert_paper_figure(figures[-1], panels=2, xlabel="evaluation resolution (pixels)")


def test_plots_format_is_read_from_the_config_and_a_wrong_one_is_one_line():
    assert figure_format({"plots": {"format": "SVG"}}) == "svg" and figure_format({}) == "png"
    with pytest.raises(ConfigError, match=r"^plots.format: unknown format 'jpg'; valid: png, svg, pdf$"):
        figure_format({"plots": {"format": "jpg"}})


def test_the_config_tree_declares_png_as_the_default():
    from posenc.engine.config import compose

    assert figure_format(compose([])) == "png" and compose([])["plots"]["format"] == "png"
    assert figure_format(compose(["plots.format=pdf"])) == "pdf"
