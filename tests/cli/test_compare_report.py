"""`posenc compare` and `posenc report` on run directories, a sweep folder and CSV tables made
with the real RunDir and sweep code (no training: the numbers are chosen)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from posenc.cli.app import app
from posenc.core.io import write_table
from posenc.engine.results import RunDir
from posenc.launch import sweep

BASE = {
    "model": {"d_model": 32},
    "pe": {"_target_": "posenc.pe.rope.RoPE", "base": 10000.0},
    "train": {"lr": 0.003, "steps": 20},
    "seed": 0,
    "protocol": "posenc.experiments.train.run",
    "choices": {"model": "lm_tiny", "pe": "rope", "task": "text"},
}


def fake_run(root: Path, pe: str, seed: int, val_loss: float, lr: float = 0.003) -> Path:
    pe_node = (
        {"_target_": "posenc.pe.rope.RoPE", "base": 10000.0}
        if pe == "rope"
        else {"_target_": "posenc.pe.nope.NoPE", "ndim": 1}
    )
    config = {
        **BASE,
        "pe": pe_node,
        "seed": seed,
        "train": {"lr": lr, "steps": 20},
        "choices": {**BASE["choices"], "pe": pe},
    }
    run = RunDir.create(root, f"lm_tiny-{pe}-text", config)
    for step in (10, 20):
        run.log({"step": step, "train_loss": val_loss + 1 / step})
        run.log({"step": step, "val_loss": val_loss + 0.5 / step})
    write_table(
        pd.DataFrame([{"pe": pe, "seed": seed, "steps": 20, "val_loss": val_loss, "val_bpb": val_loss * 1.5}]), run.path
    )
    run.update_summary(status="completed")
    return run.path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_compare_joins_runs_on_differing_keys_with_paired_differences_and_exports(tmp_path):
    runs = [
        fake_run(tmp_path, pe, seed, loss)
        for pe, seed, loss in [("rope", 0, 2.0), ("rope", 1, 2.5), ("nope", 0, 3.0), ("nope", 1, 3.25)]
    ]
    out = [tmp_path / "cmp.csv", tmp_path / "cmp.md", tmp_path / "cmp.tex"]
    result = invoke(
        "compare",
        *map(str, runs),
        "--baseline",
        "pe=nope",
        "--metrics",
        "val_loss",
        "--runs",
        *[a for p in out for a in ("-o", str(p))],
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out[0])
    # joined on pe and seed (the keys that differ; pe.* follow from the choice), then run
    assert table.columns.tolist() == ["pe", "seed", "run", "steps", "val_loss", "Δ val_loss"]
    assert table["run"].tolist() == [r.name for r in runs]
    # paired by seed against the baseline rows: rope seed 0 - nope seed 0, …
    assert table["Δ val_loss"].tolist() == pytest.approx([-1.0, -0.75, 0.0, 0.0])
    md = out[1].read_text().splitlines()
    assert md[0].split("|")[1:-1] == [
        " pe   ",
        "   seed ",
        f" {'run':<{len(runs[0].name)}} ",
        "   steps ",
        "   val_loss ",
        "   Δ val_loss ",
    ]
    tex = out[2].read_text()
    assert tex.startswith(
        "\\begin{tabular}{lrlrrr}\n\\toprule\npe & seed & run & steps & val\\_loss & "
        "$\\Delta$ val\\_loss \\\\\n\\midrule\n"
    )
    assert f"rope & 0 & {runs[0].name.replace('_', chr(92) + '_')} & 20 & 2 & -1 \\\\" in tex
    assert tex.endswith("\\bottomrule\n\\end{tabular}\n")


def test_compare_a_sweep_folder_and_a_csv_table(tmp_path):
    jobs = [["pe=rope", "seed=0"], ["pe=rope", "seed=1"]]
    sweep_dir = sweep.create(tmp_path, ["pe=rope", "seed=0,1"], "basic", jobs)
    for num, loss in enumerate([2.0, 2.4]):
        fake_run(sweep_dir / str(num), "rope", num, loss)
    csv = tmp_path / "paper.csv"
    pd.DataFrame([{"pe": "nope", "seed": 0, "val_loss": 3.0}, {"pe": "nope", "seed": 1, "val_loss": 3.2}]).to_csv(
        csv, index=False
    )
    result = invoke(
        "compare",
        str(sweep_dir),
        str(csv),
        "--baseline",
        str(csv),
        "--metrics",
        "val_loss",
        "--runs",
        "-o",
        str(tmp_path / "out.csv"),
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "out.csv")
    assert table[["pe", "seed", "val_loss"]].values.tolist() == [
        ["rope", 0, 2.0],
        ["rope", 1, 2.4],
        ["nope", 0, 3.0],
        ["nope", 1, 3.2],
    ]
    assert table["Δ val_loss"].tolist() == pytest.approx([-1.0, -0.8, 0.0, 0.0])


def sweep_of(tmp_path: Path, losses: dict[str, list[float]], **extra: float) -> Path:
    """A sweep folder over pe × seed whose runs' tables hold the given validation losses."""
    jobs = [[f"pe={pe}", f"seed={seed}"] for pe, values in losses.items() for seed in range(len(values))]
    sweep_dir = sweep.create(tmp_path, [f"pe={','.join(losses)}", "seed=0,1,2"], "basic", jobs)
    for num, (pe, seed) in enumerate((pe, seed) for pe, values in losses.items() for seed in range(len(values))):
        run = fake_run(sweep_dir / str(num), pe, seed, losses[pe][seed])
        if extra:
            pd.read_csv(run / "table.csv").assign(**extra).to_csv(run / "table.csv", index=False)
    return sweep_dir


def test_compare_on_a_sweep_shows_one_row_per_configuration_with_its_interval(tmp_path):
    from scipy import stats

    sweep_dir = sweep_of(tmp_path, {"rope": [2.0, 2.4, 2.2], "nope": [3.0, 3.5, 3.1]})
    result = invoke(
        "compare", str(sweep_dir), "--baseline", "pe=nope", "--metrics", "val_loss", "-o", str(tmp_path / "cfg.csv")
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "cfg.csv")
    assert table.columns.tolist() == [
        "pe",
        "steps",
        "seeds",
        "val_loss",
        "val_loss ci95_low",
        "val_loss ci95_high",
        "Δ val_loss",
        "Δ val_loss ci95_low",
        "Δ val_loss ci95_high",
    ]
    assert table["pe"].tolist() == ["rope", "nope"] and table["seeds"].tolist() == [3, 3]
    half = stats.t.ppf(0.975, 2) * stats.tstd([2.0, 2.4, 2.2]) / 3**0.5
    rope = table.iloc[0]
    assert (rope["val_loss"], rope["val_loss ci95_low"], rope["val_loss ci95_high"]) == pytest.approx(
        (2.2, 2.2 - half, 2.2 + half)
    )
    # differences are paired by seed, then averaged: (-1.0, -1.1, -0.9)
    half = stats.t.ppf(0.975, 2) * stats.tstd([-1.0, -1.1, -0.9]) / 3**0.5
    assert (rope["Δ val_loss"], rope["Δ val_loss ci95_high"]) == pytest.approx((-1.0, -1.0 + half))
    assert f"2.2 [{2.2 - stats.t.ppf(0.975, 2) * 0.2 / 3**0.5:.3g}," in result.output
    runs = invoke("compare", str(sweep_dir), "--runs", "--metrics", "val_loss", "-o", str(tmp_path / "runs.csv"))
    assert runs.exit_code == 0 and len(pd.read_csv(tmp_path / "runs.csv")) == 6


def test_the_terminal_table_keeps_every_header_whole_at_100_columns(tmp_path, monkeypatch):
    """Before, eight metrics in one table at 100 columns cut the headers to `tra…`, `val…`."""
    monkeypatch.setenv("COLUMNS", "100")
    metrics = {
        "train_loss": 2.1,
        "val_ppl": 7.5,
        "val_accuracy": 0.31,
        "unigram_bpb": 4.0,
        "tokens_per_s": 12345.6,
        "seconds": 33.3,
    }
    sweep_dir = sweep_of(tmp_path, {"rope": [2.0, 2.4, 2.2], "nope": [3.0, 3.5, 3.1]}, **metrics)
    for args in ([], ["--runs"], ["--baseline", "pe=nope"]):
        result = invoke("compare", str(sweep_dir), *args)
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert max(len(line) for line in lines) <= 100, args
        headers = {cell.strip() for line in lines if line.startswith("┃") for cell in line.strip("┃").split("┃")}
        expected = {"val_loss", "val_bpb", *metrics} | (
            {f"Δ {m}" for m in ["val_loss", "val_bpb", *metrics]} if "--baseline" in args else set()
        )
        assert expected <= headers, (args, expected - headers)
        assert not any("…" in h for h in headers)


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda t, r: [str(r), str(t / "other.csv")], "the inputs have no common keys to compare on"),
        (lambda t, r: [str(r), str(t / "missing")], "is not a run directory, a sweep directory or a CSV table"),
        (
            lambda t, r: [str(r), "--baseline", "pe=alibi"],
            "--baseline 'pe=alibi': no row has pe=alibi; values there: rope",
        ),
        (
            lambda t, r: [str(r), "--baseline", "colour=red"],
            "--baseline 'colour=red': give one of the inputs, or key=value",
        ),
        (lambda t, r: [str(r), "--metrics", "bleu"], "unknown metric 'bleu'; valid: val_loss, val_bpb"),
        (lambda t, r: [str(r), "-o", str(t / "x.xlsx")], "cannot export to"),
    ],
)
def test_compare_bad_input_is_one_line_and_exit_2(tmp_path, make_args, message):
    run = fake_run(tmp_path, "rope", 0, 2.0)
    pd.DataFrame([{"bleu": 1.0}]).to_csv(tmp_path / "other.csv", index=False)
    result = invoke("compare", *make_args(tmp_path, run))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not (tmp_path / "x.xlsx").exists()


def test_report_puts_tables_statistics_curves_and_plots_in_one_markdown_file(tmp_path):
    jobs = [["pe=rope", "seed=0"], ["pe=rope", "seed=1"], ["pe=rope", "seed=2"]]
    sweep_dir = sweep.create(tmp_path, ["pe=rope", "seed=0,1,2"], "basic", jobs)
    for num, loss in enumerate([2.0, 2.4, 2.2]):
        fake_run(sweep_dir / str(num), "rope", num, loss)
    sweep.write_tables(sweep_dir)
    single = fake_run(tmp_path / "single", "nope", 0, 3.0)
    (single / "heatmap.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (single / "length.svg").write_text("<svg/>")  # a run that wrote its figures with plots.format=svg

    result = invoke("report", str(sweep_dir), str(single), "--out", str(tmp_path / "rep"))
    assert result.exit_code == 0, result.output
    report = (tmp_path / "rep" / "report.md").read_text()
    assert (tmp_path / "rep" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![training and validation loss](curves.png)" in report
    assert "## Comparison" in report and "Joined on pe, seed, run." in report
    assert f"## Sweep {sweep_dir.name}" in report
    # the statistics of the three seeds: mean 2.2, std 0.2, 2.2 ± t(0.975, 2)·0.2/√3
    assert "| rope | val_loss |   3 |    2.2 |   0.2 |      1.703 |       2.697 |        0 |" in report
    for run in [*(sweep_dir / str(n) / "runs" for n in range(3))]:
        assert f"### {next(run.iterdir()).name}" in report
    assert "![heatmap](../single/runs/" in report and "![length](../single/runs/" in report
    for line in report.splitlines():  # every image link resolves from the report's folder
        if line.startswith("!["):
            assert (tmp_path / "rep" / line.split("](")[1].rstrip(")")).exists()


def test_report_of_a_path_that_is_not_a_run_is_refused(tmp_path):
    result = invoke("report", str(tmp_path / "nothing"), "--out", str(tmp_path / "rep"))
    assert result.exit_code == 2
    assert (
        result.output.strip()
        == f"error: '{tmp_path / 'nothing'}' is not a run directory, a sweep directory or a CSV table"
    )
    assert not (tmp_path / "rep").exists()


def order_run(root: Path, model: str, permutations: int, accuracy: float) -> Path:
    """A run of the order protocol written through the real run context: its one declared table
    is ``order``, not ``table``, and its config holds its cells' configs, not one run's choices."""
    from posenc.engine.context import RunContext
    from posenc.experiments.order import TABLES

    rows = [
        {"model": model, "attention": att, "pe": pe, "task": "order", "phase": phase, "seed": 0}
        | {"equivariance_residual": 1e-7 if pe == "nope" and att == "bidirectional" else 0.5, "accuracy": acc}
        for pe in ("nope", "rope")
        for att in ("causal", "bidirectional")
        for phase, acc in (("init", 0.5), ("trained", accuracy if pe == "rope" else 0.5))
    ]
    ctx = RunContext(root)
    config = {"permutations": permutations, "cells": {f"{model}/{pe}": {"model": {"name": model}} for pe in "ab"}}
    with ctx.running("order", config) as run:
        ctx.write(run, TABLES, {"order": pd.DataFrame(rows)})
    return run.path


def test_compare_reads_the_table_a_protocol_declares_not_only_table_csv(tmp_path):
    """Before, `posenc compare results/order/lm results/order/vit` said 'no finished run with a table'."""
    lm, vit = order_run(tmp_path / "lm", "lm_tiny", 16, 0.9), order_run(tmp_path / "vit", "vit_tiny", 8, 0.75)
    result = invoke("compare", str(lm), str(vit), "--runs", "-o", str(tmp_path / "cmp.csv"))
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "cmp.csv")
    # the runs differ in their own setting (permutations), not in every key of their cells' configs
    assert table.columns.tolist()[:2] == ["permutations", "run"] and len(table) == 16
    trained = table[(table.phase == "trained") & (table.pe == "rope")]
    assert trained.groupby("model")["accuracy"].mean().to_dict() == {"lm_tiny": 0.9, "vit_tiny": 0.75}
    assert set(table.loc[table.model == "vit_tiny", "permutations"]) == {8}
    # a table named by --table; a name no run wrote lists those they did
    assert invoke("compare", str(lm), str(vit), "--table", "order").exit_code == 0
    bad = invoke("compare", str(lm), str(vit), "--table", "depth")
    assert bad.exit_code == 2 and bad.output.strip() == "error: no run has a table 'depth'; tables there: order"


def test_compare_picks_any_declared_table_of_a_run_with_several(tmp_path):
    from posenc.engine.context import RunContext
    from posenc.experiments.extrapolation.protocol import TABLES

    def run_of(pe: str, loss: float) -> Path:
        ctx = RunContext(tmp_path)
        config = {"lengths": [16, 32], "cells": [{"choices": {"pe": pe}}]}
        head = {"pe": pe, "scale": "none", "finetune_steps": 0, "seed": 0}
        main = pd.DataFrame([{**head, "metric": "bpb", "16": loss, "32": 2 * loss}])
        per_position = pd.DataFrame(
            [{**head, "length": 32, "start": s, "end": s + 16, "bits": loss + s} for s in (0, 16)]
        )
        with ctx.running(f"extrapolate-{pe}", config) as run:
            ctx.write(run, TABLES, {"table": main, "per_position": per_position})
        return run.path

    a, b = run_of("rope", 1.0), run_of("nope", 1.5)
    out = tmp_path / "pos.csv"
    result = invoke("compare", str(a), str(b), "--table", "per_position", "--runs", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert pd.read_csv(out)[["pe", "start", "bits"]].values.tolist() == [
        ["rope", 0, 1.0],
        ["rope", 16, 17.0],
        ["nope", 0, 1.5],
        ["nope", 16, 17.5],
    ]
    result = invoke("compare", str(a), str(b), "--runs", "-o", str(out))  # the main table by default
    assert pd.read_csv(out)["32"].tolist() == [2.0, 3.0]


def test_a_run_written_before_summaries_listed_tables_is_read_by_its_files(tmp_path):
    """results/order/lm of an earlier version: order.csv and order.md, a summary without tables."""
    run = order_run(tmp_path, "lm_tiny", 16, 0.9)
    summary = RunDir(run).read_summary()
    RunDir(run).write_summary({k: v for k, v in summary.items() if k not in ("table", "tables")})
    from posenc.reporting.compare import tables_of

    assert tables_of(run) == ["order"]
    assert invoke("compare", str(run), "--runs").exit_code == 0


def test_report_shows_every_table_a_run_declared(tmp_path):
    lm, vit = order_run(tmp_path / "lm", "lm_tiny", 16, 0.9), order_run(tmp_path / "vit", "vit_tiny", 8, 0.75)
    real = RunDir.create(tmp_path / "real", "real", {"lengths": [64]})
    write_table(pd.DataFrame([{"scale": "yarn", "metric": "ppl", "64": 9.5}]), real.path, "table")
    write_table(pd.DataFrame([{"scale": "yarn", "depth": 0.5, "64": 1.0}]), real.path, "passkey")
    real.update_summary(status="completed", table="table", tables=["table", "passkey"])
    result = invoke("report", str(lm), str(vit), str(real.path), "--out", str(tmp_path / "rep"))
    assert result.exit_code == 0, result.output
    report = (tmp_path / "rep" / "report.md").read_text()
    # the order runs' main tables joined (the real run has none of their columns), and each run's own
    assert "## Comparison" not in report  # three runs with no column common to all
    assert (
        "| lm_tiny | causal        | rope | order  | trained |      0 |                   0.5   |        0.9 |"
        in report
    )
    alone = invoke("report", str(lm), str(vit), "--out", str(tmp_path / "rep2"))
    assert alone.exit_code == 0 and "Joined on permutations, run." in (tmp_path / "rep2" / "report.md").read_text()
    assert "Table `table`:" in report and "Table `passkey`:" in report
    assert (
        report.index("Table `table`:")
        < report.index("| yarn    | ppl      |  9.5 |")
        < report.index("Table `passkey`:")
    )


def test_compare_of_wide_order_tables_fits_80_columns(tmp_path, monkeypatch):
    """Eight key columns leave no room beside them at 80 columns: each stacked table repeats a row
    number instead, and every header and value stays whole."""
    monkeypatch.setenv("COLUMNS", "80")
    lm, vit = order_run(tmp_path / "lm", "lm_tiny", 16, 0.9), order_run(tmp_path / "vit", "vit_tiny", 8, 0.75)
    result = invoke("compare", str(lm), str(vit), "--runs", "-o", str(tmp_path / "cmp.csv"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in result.output
    headers = {c.strip() for line in lines if line.startswith("┃") for c in line.strip("┃").split("┃")}
    assert {"#", "permutations", "model", "attention", "pe", "phase", "equivariance_residual", "accuracy"} <= headers
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    assert ["16", "lm_tiny", "bidirectional", "rope"] in [r[1:5] for r in rows if r[0] == "8"]
