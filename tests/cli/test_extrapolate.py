"""``posenc extrapolate`` end to end on a tiny model, cache reuse, and bad input."""

import json
import math

import pandas as pd
import pytest

TINY = ["experiment=smoke", "train.steps=4", "train.seq_len=16", "eval.max_windows=4"]


@pytest.mark.slow  # two trainings and two runs: ~30 s on a loaded 2-core machine, most of it imports
def test_end_to_end_table_files_and_cache(cli, tmp_path):
    args = [
        "--pe",
        "rope,learned",
        "--scale",
        "none,pi,interpolate",
        "--lengths",
        "16,32",
        "--results-dir",
        str(tmp_path),
        "-q",
        *TINY,
    ]
    code, out, err = cli("extrapolate", *args)
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    for name in (
        "table.csv",
        "table.md",
        "per_position.csv",
        "per_position.md",
        "length.png",
        "per_position.png",
        "config.yaml",
        "summary.json",
    ):
        assert (run / name).stat().st_size > 0, name
    table = pd.read_csv(run / "table.csv")
    assert list(table.columns) == [
        "pe",
        "scale",
        "finetune_steps",
        "seed",
        "metric",
        "16",
        "32",
        "split",
        "items",
        "chance",
        "steps",
        "criterion",
        "target",
        "reached_target",
        "target_step",
        "params",
    ]
    assert list(zip(table.pe, table.scale, table.metric)) == [
        ("rope", "none", "bpb"),
        ("rope", "none", "ppl"),
        ("rope", "pi", "bpb"),
        ("rope", "pi", "ppl"),
        ("learned", "none", "bpb"),
        ("learned", "none", "ppl"),
        ("learned", "interpolate", "bpb"),
        ("learned", "interpolate", "ppl"),
    ]
    bpb = table[table.metric == "bpb"].set_index(["pe", "scale"])
    ppl = table[table.metric == "ppl"].set_index(["pe", "scale"])
    assert 1.0 < bpb.loc[("rope", "none"), "16"] < 8.0
    assert ppl.loc[("rope", "none"), "32"] == pytest.approx(2 ** bpb.loc[("rope", "none"), "32"])
    # at the training length every scale is the identity; past it PI changes the numbers
    assert bpb.loc[("rope", "pi"), "16"] == bpb.loc[("rope", "none"), "16"]
    assert bpb.loc[("rope", "pi"), "32"] != bpb.loc[("rope", "none"), "32"]
    assert bpb.loc[("learned", "interpolate"), "16"] == bpb.loc[("learned", "none"), "16"]
    assert math.isnan(bpb.loc[("learned", "none"), "32"]) and not math.isnan(bpb.loc[("learned", "interpolate"), "32"])
    positions = pd.read_csv(run / "per_position.csv")
    assert set(positions.length) == {16, 32} and (positions.end - positions.start).min() >= 1
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and not any(m["reused"] for m in summary["models"])
    assert "learned/none at 32: position 31 is past the LearnedPE table" in summary["notes"][0]
    caches = sorted((tmp_path / "cache").iterdir())
    assert len(caches) == 2  # one training per scheme, shared by its scales
    stamps = {p: p.joinpath("metrics.jsonl").stat().st_mtime_ns for p in caches}

    code, again, err = cli("extrapolate", *args)
    assert code == 0, err
    [second] = [r for r in (tmp_path / "runs").iterdir() if r != run]
    assert all(m["reused"] for m in json.loads((second / "summary.json").read_text())["models"])
    assert {p: p.joinpath("metrics.jsonl").stat().st_mtime_ns for p in caches} == stamps  # not retrained
    pd.testing.assert_frame_equal(pd.read_csv(second / "table.csv"), table)
    assert "rope" in again and "interpolate" in again and str(second) in again.replace("\n", "")


def test_task_with_finetune_reports_both(cli, tmp_path):
    code, _, err = cli(
        "extrapolate",
        "--pe",
        "rope",
        "--scale",
        "yarn",
        "--task",
        "passkey",
        "--lengths",
        "16,24",
        "--finetune-steps",
        "2",
        "--results-dir",
        str(tmp_path),
        "-q",
        *TINY,
        "eval.max_windows=10",
    )
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    table = pd.read_csv(run / "table.csv")
    # --scale yarn comes with its unscaled baseline
    assert list(zip(table.scale, table.finetune_steps, table.metric)) == [
        (s, ft, m) for s in ("none", "yarn") for ft in (0, 2) for m in ("exact_match", "accuracy", "loss")
    ]
    assert table[["16", "24"]].loc[table.metric != "loss"].stack().between(0, 1).all()
    # every cell scores task.trials (64) sequences at each of the 5 depths, on the test split
    assert (table["items"] == 320).all() and (table.split == "test").all()
    assert table.set_index("metric").chance.loc["accuracy"].eq(0.1).all()
    assert (run / "depth.png").stat().st_size > 0
    depth = pd.read_csv(run / "depth.csv")
    assert sorted(set(depth.depth)) == [0.0, 0.25, 0.5, 0.75, 1.0] and list(depth.columns[:8]) == [
        *("pe", "scale", "finetune_steps", "seed", "metric", "depth", "16", "24")
    ]
    assert list(depth.columns[8:]) == [
        *("items", "split", "chance", "steps", "criterion", "target", "reached_target", "target_step")
    ]
    assert (depth["items"] == 64).all() and set(depth.metric) == {"exact_match", "accuracy"}
    assert (depth.steps == 4).all() and not depth.reached_target.any()  # 4 steps: short of 0.95
    # one visible line says so and what to change, even under -q; the summary keeps it
    [line] = [x for x in err.splitlines() if "ended under its target" in x]
    assert line.startswith("rope (seed 0) ended under its target (accuracy ≥ 0.95 on validation) at its 4-step cap")
    assert "Raise train.steps" in line and line in json.loads((run / "summary.json").read_text())["notes"]
    assert (table.steps == 4).all() and not table.reached_target.any() and table.target_step.isna().all()
    [cache] = (tmp_path / "cache").iterdir()  # the trained model's folder records how its training ended
    summary = json.loads((cache / "summary.json").read_text())
    assert (summary["criterion"], summary["target"], summary["reached_target"], summary["target_step"]) == (
        "accuracy",
        0.95,
        False,
        None,
    ) and summary["steps"] == 4


@pytest.mark.parametrize(
    "args,message",
    [
        (["--pe", "bogus"], "unknown pe 'bogus'; valid:"),
        (["--scale", "bogus"], "unknown scale 'bogus'; valid: all,"),
        (["--task", "bogus"], "unknown task 'bogus'; valid:"),
        (["--pe", "nope", "--scale", "yarn"], "no requested scale applies to pe 'nope' (yarn); scales for nope: none"),
        (["--lengths", "16,0"], "evaluation length must be >= 1, got 0"),
        (["--lengths", "16,abc"], "--lengths '16,abc' is not a comma list of integers"),
        (["--lengths", "16,100000"], "sequence length 100000 is longer than the val split"),
        (["--scale", "longrope"], "scale longrope needs scale.short_factor"),
        (
            ["--scale", "longrope", "scale.short_factor=[1,1,1,1,1,1,1,1]", "scale.long_factor=[1]"],
            "scale.long_factor has 1 factors, but the rotary dimension 16 has 8 frequencies",
        ),
        (["--scale", "pi", "scale.factor=0"], "scale.factor must be > 0, got 0.0"),
        (["--pe", "rope,", "--scale", "pi"], "--pe 'rope,' has an empty item"),
        (["scale=yarn"], "override 'scale=yarn': give schemes with --pe and scales with --scale"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(cli, tmp_path, args, message):
    code, out, err = cli("extrapolate", "--results-dir", tmp_path / "out", "-q", *TINY, *args)
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()
