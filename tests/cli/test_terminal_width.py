"""Every command's terminal table at 80 columns: no line wider, no header and no number cut
(before, `posenc extrapolate --task passkey` printed `sca…`, `met…`, `0.1…` in eleven columns)."""

from __future__ import annotations

import pandas as pd
import pytest

from posenc.cli.common import fit, value_text

LM = ["model.d_model=16", "model.n_heads=2", "model.n_layers=1", "model.mlp_hidden=32", "train.warmup_steps=1"]


def shown(out: str) -> tuple[set[str], set[str]]:
    """The header cells and the value cells of every table printed, and the footnote's name=value
    pairs as both (a footnote line wraps at spaces, never inside a pair)."""
    lines = out.splitlines()
    headers = {c.strip() for line in lines if line.startswith("┃") for c in line.strip("┃").split("┃")}
    values = {c.strip() for line in lines if line.startswith("│") for c in line.strip("│").split("│")}
    for word in (w.rstrip(",") for line in lines if not line.startswith(("┃", "│")) for w in line.split()):
        name, sep, value = word.partition("=")
        if sep:
            headers.add(name)
            values.add(value)
    return headers, values


def fits(out: str) -> bool:
    """No line wider than 80 columns but the run folder's path (kept whole to copy)."""
    return all(len(line) <= 80 for line in out.splitlines() if not line.startswith("run directory: "))


def assert_whole(out: str, table: pd.DataFrame, left_out: tuple[str, ...] = ()) -> None:
    assert fits(out), out
    assert "…" not in out, out
    headers, values = shown(out)
    for column in table.columns.drop(list(left_out), errors="ignore"):
        assert str(column) in headers, (column, out)
        for v in table[column]:
            assert value_text(v) in values, (column, v, out)


def run_dir(root):
    [run] = (root / "runs").iterdir()
    return run


@pytest.mark.slow  # two trainings and ten scored cells: ~20 s on a loaded 2-core machine
@pytest.mark.parametrize("task", ["passkey", "text"])
def test_extrapolate_fits_80_columns_and_names_the_lengths_below_training(cli, tmp_path, monkeypatch, task):
    monkeypatch.setenv("COLUMNS", "80")
    lengths = "12,16,32,64,128,256" if task == "passkey" else "8,16,32,64,128,256"
    args = ["--pe", "rope,learned", "--scale", "none,pi,interpolate", "--lengths", lengths, "--task", task]
    code, out, err = cli(
        "extrapolate", *args, "--results-dir", tmp_path, "-q", *LM, "train.steps=2", "train.seq_len=16"
    )
    assert code == 0, err
    table = pd.read_csv(run_dir(tmp_path) / "table.csv", keep_default_na=False, na_values=[""])
    assert_whole(out, table)
    assert f"evaluated below the training length (16 tokens): {lengths.split(',')[0]}" in out.splitlines()


def test_order_and_resolution_fit_80_columns(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli(
        "order", "--model", "lm_tiny", "--pe", "nope,rope", "--steps", "2", "-k", "2", "--results-dir", tmp_path / "o",
        "-q", *LM, "train.batch_size=8", "train.seq_len=8", "eval.max_windows=16",
    )  # fmt: skip
    assert code == 0, err
    assert_whole(out, pd.read_csv(run_dir(tmp_path / "o") / "order.csv"), left_out=("train_seconds",))
    code, out, err = cli(
        "resolution", "--pe", "learned,nope", "--interp", "bicubic,nearest", "--res", "16,24,32,48,64",
        "--steps", "2", "--finetune-steps", "1", "--results-dir", tmp_path / "r", "-q",
        *LM, "task.val_size=8", "train.batch_size=4", "eval.periodic_windows=8", "resolution.eval_items=8",
    )  # fmt: skip
    assert code == 0, err
    assert_whole(out, pd.read_csv(run_dir(tmp_path / "r") / "table.csv"))


def test_train_fits_80_columns(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("train", "--results-dir", tmp_path, "-q", *LM, "train.steps=2", "train.seq_len=16")
    assert code == 0, err
    assert fits(out) and "…" not in out
    row = pd.read_csv(run_dir(tmp_path) / "table.csv").iloc[0]
    values = {c.strip() for line in out.splitlines() if line.startswith("│") for c in line.strip("│").split("│")}
    assert {str(k) for k in row.index} <= values and {value_text(v) for v in row} <= values


def test_stacked_tables_repeat_the_keys_or_a_row_number_and_each_fits():
    widths = {"#": 2, "pe": 7, "scale": 11, **{str(n): 6 for n in range(10)}}
    front, parts = fit(widths, ["pe", "scale"], [str(n) for n in range(10)], 80)
    assert front == ["pe", "scale"] and [len(p) for p in parts] == [6, 4]
    assert all(sum(widths[c] + 3 for c in front + p) + 1 <= 80 for p in parts)
    # keys too wide to leave room for a value: each table repeats a row number instead
    wide = {**widths, "pe": 40, "scale": 30}
    front, parts = fit(wide, ["pe", "scale"], ["0", "1"], 80)
    assert front == ["#"] and parts == [["pe", "0", "1"], ["scale"]]  # each column into the first table with room
    assert all(sum(wide[c] + 3 for c in front + p) + 1 <= 80 for p in parts)


def test_check_fits_80_columns(cli, tmp_path, monkeypatch):
    """The claims' prose column alone nearly fills 80 columns: it gets a table of its own."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("check", "--pe", "rope,sinusoidal", "--results-dir", tmp_path)
    assert code == 0, err
    assert_whole(out, pd.read_csv(run_dir(tmp_path) / "check.csv"), left_out=("note",))


def test_a_column_wider_than_the_terminal_wraps_at_spaces_instead_of_being_cut(monkeypatch, capsys):
    from posenc.cli.common import print_frame

    monkeypatch.setenv("COLUMNS", "80")
    overrides = " ".join(f"model.key_{i}={i * 1.5}" for i in range(12))  # ~210 characters
    table = pd.DataFrame(
        [{"sweep": "text", "job": 0, "overrides": overrides}, {"sweep": "order", "job": 1, "overrides": "seed=1"}]
    )
    print_frame(table, ["sweep", "job"])
    out = capsys.readouterr().out
    assert fits(out) and "…" not in out
    words = [w for line in out.splitlines() for w in line.strip("│┃ ").replace("│", " ").split()]
    assert all(w in words for w in overrides.split())


def test_the_footnote_shows_values_as_they_are(monkeypatch, capsys):
    from posenc.cli.common import print_frame

    monkeypatch.setenv("COLUMNS", "80")
    table = pd.DataFrame({"pe": ["rope", "nope"], "scales": ["[pi, yarn]"] * 2, "bpb": [1.5, float("nan")]})
    print_frame(table, ["pe"])
    out = capsys.readouterr().out
    assert "every row: scales=[pi, yarn]" in out.splitlines() and "│ nope │   – │" in out
