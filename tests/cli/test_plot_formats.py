"""``plots.format`` reaches every figure a command writes; a format matplotlib should not be
asked for is one line and exit 2 before any run folder exists."""

from __future__ import annotations

from test_terminal_width import LM, run_dir

ORDER = ["order", "--model", "lm_tiny", "--pe", "nope", "--steps", "1", "-k", "2", "-q", *LM]
ORDER += ["train.batch_size=8", "train.seq_len=8", "eval.max_windows=8"]


def test_order_and_resolution_write_their_figures_in_the_configured_format(cli, tmp_path):
    code, _, err = cli(*ORDER, "--results-dir", tmp_path / "o", "plots.format=svg")
    assert code == 0, err
    figures = sorted(p.name for p in run_dir(tmp_path / "o").iterdir() if p.suffix in (".png", ".svg", ".pdf"))
    assert figures == ["order.svg"] and (run_dir(tmp_path / "o") / "order.svg").read_bytes().startswith(b"<?xml")
    code, _, err = cli(
        "resolution", "--pe", "learned", "--interp", "bicubic", "--res", "16,32", "--steps", "1",
        "--finetune-steps", "0", "--results-dir", tmp_path / "r", "-q", *LM, "task.val_size=8",
        "train.batch_size=4", "eval.periodic_windows=8", "resolution.eval_items=8", "plots.format=pdf",
    )  # fmt: skip
    assert code == 0, err
    run = run_dir(tmp_path / "r")
    figures = sorted(p.name for p in run.iterdir() if p.suffix in (".png", ".svg", ".pdf"))
    assert figures == ["accuracy.pdf", "similarity_learned.pdf"]
    assert all((run / f).read_bytes().startswith(b"%PDF-") for f in figures)


def test_an_unknown_plot_format_is_one_line_before_any_work(cli, tmp_path):
    code, out, err = cli(*ORDER, "--results-dir", tmp_path, "plots.format=jpg")
    assert code == 2 and err.strip() == "error: plots.format: unknown format 'jpg'; valid: png, svg, pdf"
    assert not (tmp_path / "runs").exists()


def test_extrapolate_writes_its_figures_in_the_configured_format(cli, tmp_path):
    args = ["--pe", "rope", "--lengths", "12,16", "--task", "passkey", "-q", *LM, "train.steps=1", "train.seq_len=16"]
    code, _, err = cli("extrapolate", *args, "--results-dir", tmp_path / "ok", "plots.format=pdf")
    assert code == 0, err
    run = run_dir(tmp_path / "ok")
    figures = sorted(p.name for p in run.iterdir() if p.suffix in (".png", ".svg", ".pdf"))
    assert figures == ["depth.pdf", "length.pdf", "per_position.pdf"]
    assert all((run / f).read_bytes().startswith(b"%PDF-") for f in figures)
    code, _, err = cli("extrapolate", *args, "--results-dir", tmp_path / "bad", "plots.format=eps")
    assert code == 2 and err.strip() == "error: plots.format: unknown format 'eps'; valid: png, svg, pdf"
    assert not (tmp_path / "bad" / "runs").exists()
