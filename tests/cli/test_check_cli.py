"""`posenc check` end to end: passes on the tree's schemes, exit 1 when a check fails, 2 on a mistake."""

import json

import pandas as pd


def invoke(cli, tmp_path, *args):
    return cli("check", "--results-dir", tmp_path / "res", "-q", *args)


def only_run(tmp_path):
    (run,) = (tmp_path / "res" / "runs").iterdir()
    return run


def test_check_passes_on_rope_and_sinusoidal_and_writes_a_png_per_check(cli, tmp_path):
    code, out, err = invoke(cli, tmp_path, "--pe", "rope,sinusoidal")
    assert code == 0, out + err
    run = only_run(tmp_path)
    table = pd.read_csv(run / "check.csv")
    assert table.passed.all() and set(table.claim) == {"C4", "C9", "C10"}
    assert (table.measured <= table.tolerance).sum() == len(table) - 1  # periodicity is a lower bound
    for name in ("c4_shift", "c9_relative", "c9_norm", "c9_values", "c10_decay", "c10_periodicity"):
        assert (run / f"{name}.png").stat().st_size > 1000, name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["passed"] and summary["failed"] == 0 and summary["status"] == "completed"


def test_a_failing_check_exits_1(cli, tmp_path):
    # base ~ 1 makes every RoPE frequency ~ 1: still a rotation, but no decay and no long period
    code, out, err = invoke(cli, tmp_path, "--pe", "rope", "pe.base=1.000001")
    assert code == 1, out + err
    assert "2 of 7 checks failed" in err
    table = pd.read_csv(only_run(tmp_path) / "check.csv")
    assert set(table[~table.passed].claim) == {"C10"}
    assert not json.loads((only_run(tmp_path) / "summary.json").read_text())["passed"]


def test_unknown_scheme_is_one_line_exit_2_and_nothing_written(cli, tmp_path):
    code, out, err = invoke(cli, tmp_path, "--pe", "rope,nosuch")
    assert code == 2
    line = err.strip()
    assert "\n" not in line and "unknown pe 'nosuch'" in line and "sinusoidal" in line
    assert not (tmp_path / "res").exists()


def test_a_scheme_that_builds_with_no_model_is_exit_2(cli, tmp_path):
    code, out, err = invoke(cli, tmp_path, "--pe", "rope", "pe.rotary_fraction=0.01")
    assert code == 2 and "pe 'rope' does not build with model" in err
    assert not (tmp_path / "res").exists()


def test_a_scheme_no_check_applies_to_is_said_and_exit_0(cli, tmp_path):
    code, out, err = invoke(cli, tmp_path, "--pe", "nope,learned")
    assert code == 0 and "no check applies" in out + err
    assert len(pd.read_csv(only_run(tmp_path) / "check.csv")) == 0
