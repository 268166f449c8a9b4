"""`posenc suite`: which runs and seeds it plans, an end-to-end tiny suite that writes REPORT.md
through `posenc sweep`, and the mistakes that stop it before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from posenc.cli.app import app
from posenc.engine.config import options_where
from posenc.launch.suite import selected

runner = CliRunner()

TINY_LM = [
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=64",
    "train.batch_size=4",
    "train.warmup_steps=1",
    "train.log_every=1",
    "train.eval_every=1000",
    "train.checkpoint_every=1000",
    "eval.max_windows=4",
    "eval.periodic_windows=2",
    "train.seq_len=16",
    "train.steps=3",
    "extrapolation.lengths=[16,32]",
    "train.target_accuracy=null",
]  # no target: a 3-step model reads as is
TINY_VIT = [
    "model.d_model=16",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=32",
    "task.val_size=8",
    "train.batch_size=4",
    "train.steps=2",
    "train.warmup_steps=1",
    "train.eval_every=1000",
    "eval.periodic_windows=4",
    "train.target_accuracy=null",
]
TINY_ORDER = (
    "order.overrides=['train.steps=2','train.warmup_steps=1','model.d_model=16','model.n_layers=1',"
    "'model.mlp_hidden=32','task.eval_size=16','train.target_accuracy=null']"
)


def tiny_suite(path: Path, seeds=(0, 1), extra: list[str] | None = None) -> Path:
    suite = {
        "description": "a tiny suite for the tests",
        "seeds": list(seeds),
        "launcher": "basic",
        "sweeps": {
            "extrapolation_text": {
                "description": "text",
                "overrides": ["experiment=extrapolation", "task=text", "pe=alibi,rope", *TINY_LM, *(extra or [])],
            },
            "extrapolation_target": {
                "description": "fixed factor",
                "overrides": [
                    "experiment=extrapolation",
                    "task=text",
                    "pe=rope",
                    "extrapolation.scales=[pi,ntk,yarn]",
                    "extrapolation.factor=2",
                    "extrapolation.finetune_steps=1",
                    *TINY_LM,
                    "extrapolation.lengths=[16,32,64]",
                ],
            },
            "extrapolation_passkey": {
                "description": "passkey",
                "overrides": ["experiment=extrapolation", "task=passkey", "pe=nope,rope", *TINY_LM, "task.eval_size=8"],
            },
            "resolution": {
                "description": "ViT",
                "overrides": [
                    "experiment=resolution",
                    "pe=nope,learned",
                    "resolution.resolutions=[16,32]",
                    "resolution.methods=[bicubic]",
                    "resolution.finetune_steps=1",
                    "resolution.eval_items=8",
                    *TINY_VIT,
                ],
            },
            "resolution_relational": {
                "description": "ViT, relational label",
                "overrides": [
                    "experiment=resolution",
                    "task.label=above",
                    "pe=nope,learned",
                    "resolution.resolutions=[16,32]",
                    "resolution.methods=[bicubic]",
                    "resolution.finetune_steps=0",
                    "resolution.eval_items=8",
                    *TINY_VIT,
                ],
            },
            "order": {
                "description": "order",
                "overrides": [
                    "experiment=order",
                    "order.pes=[nope]",
                    "order.models=[lm_tiny]",
                    "order.permutations=2",
                    TINY_ORDER,
                ],
            },
            "check": {"description": "check", "overrides": ["experiment=check", "check.pes=[sinusoidal,rope,t5]"]},
        },
    }
    path.write_text(json.dumps(suite))  # JSON is YAML
    return path


def dry_plan(output: str) -> dict[str, dict]:
    """A dry run's plan read back: per sweep its job count, the values of each swept key, and the
    overrides every job shares (each field's wrapped lines joined; a value split after a comma
    rejoined)."""
    plans, field = {}, None
    for line in output.splitlines():
        if head := re.match(r"(\S+): (\d+) jobs", line):
            plans[head[1]] = plan = {"jobs": int(head[2])}
        elif line.startswith("  ") and not line.startswith("    "):
            field, text = line.strip().split(": ", 1)
            plan[field] = text
        elif line.startswith("    ") and field is not None:
            plan[field] += ("" if plan[field].endswith(",") and field == "every job" else " ") + line.strip()
    for plan in plans.values():
        for field in [f for f in plan if f not in ("jobs", "every job")]:
            plan[field] = plan[field].split(", ")
        plan["every job"] = plan["every job"].split()
    return plans


def test_quick_suite_plans_every_experiment_over_three_seeds(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = runner.invoke(app, ["suite", "--quick", "--dry-run", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert max(map(len, result.output.splitlines())) <= 80  # the plan fits 80 columns
    plan = dry_plan(result.output)
    counts = {sweep: p["jobs"] for sweep, p in plan.items()}
    one_d = options_where("pe", lambda c: c.ndim == 1)
    relational = options_where("pe", lambda c: c.ndim == 2 or c.encodes == "nothing")
    image = relational + ["learned"]
    assert counts == {
        "extrapolation_text": 3 * len(one_d),
        "extrapolation_target": 3,
        "extrapolation_passkey": 3 * len(one_d),
        "resolution": 3 * len(image),
        "resolution_relational": 3 * len(relational),
        "order": 3,
        "check": 3,
    }
    for sweep, part in plan.items():
        assert part["seed"] == ["0", "1", "2"], sweep
        assert part["jobs"] == len(part["seed"]) * len(part.get("pe", [""])), sweep  # every scheme x seed
    text = plan["extrapolation_text"]
    # every 1D scheme, chosen by its class: those the suite once listed by hand and those it missed
    assert sorted(text["pe"]) == sorted(one_d)
    assert set(one_d) >= set("nope learned sinusoidal t5 alibi kerple fire rope relative xpos".split())
    assert {"task=text", "experiment=extrapolation"} <= set(text["every job"])
    vit = plan["resolution"]
    assert sorted(vit["pe"]) == sorted(image)
    assert set(image) >= set("nope learned learned2d sincos2d rel2d alibi2d rope2d_axial rope2d_mixed".split())
    assert "resolution.methods=[bilinear,bicubic,extrapolate]" in vit["every job"]
    rel = plan["resolution_relational"]
    assert sorted(rel["pe"]) == sorted(relational)
    assert {"task.label=above", "resolution.finetune_steps=0"} <= set(rel["every job"])
    total = sum(counts.values())
    assert f"suite quick: {total} jobs in 7 sweeps, launcher joblib" in result.output and total == 114
    target = plan["extrapolation_target"]
    assert {"extrapolation.factor=4", "extrapolation.finetune_steps=25"} <= set(target["every job"])
    overrides = "order.overrides=['train.steps=80','train.warmup_steps=10','model.d_model=64',"
    assert any(o.startswith(overrides) for o in plan["order"]["every job"])  # wider than a line: split at commas
    assert not (tmp_path / "suites").exists()  # a dry run writes nothing


def test_seeds_and_only_pick_the_runs(tmp_path):
    result = runner.invoke(
        app, ["suite", "--quick", "--dry-run", "--only", "check,order", "--seeds", "7", "--results-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "suite quick: 2 jobs in 2 sweeps" in result.output
    assert "experiment=check seed=7" in result.output
    assert "order.permutations=8" in result.output


@pytest.mark.slow
def test_a_tiny_suite_runs_through_sweeps_and_writes_the_report(tmp_path):
    suite = tiny_suite(tmp_path / "tiny.yaml")
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["suite", "--suite", str(suite), "--results-dir", str(tmp_path / "res"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    (suite_dir,) = (tmp_path / "res" / "suites").iterdir()
    meta = json.loads((suite_dir / "suite.json").read_text())
    assert meta["suite"] == "tiny" and meta["seeds"] == [0, 1] and meta["seconds"] > 0
    for name, sweep in meta["sweeps"].items():
        runs = pd.read_csv(suite_dir / sweep["dir"] / "runs.csv")
        assert runs["status"].tolist() == ["completed"] * len(runs), name
        assert sweep["seconds"] > 0
    text = (out / "REPORT.md").read_text()
    for n in range(1, 13):
        assert f"### C{n} — " in text
    assert "Not measured" not in text
    tables = {p.stem: pd.read_csv(p) for p in (out / "suite").glob("*.csv")}
    assert set(tables) >= {
        "extrapolation_text",
        "extrapolation_target",
        "extrapolation_passkey",
        "resolution",
        "resolution_similarity",
        "resolution_relational",
        "order",
        "check",
    }
    assert (out / "suite" / "resolution_relational.png").exists()
    target = tables["extrapolation_target"]
    assert set(target.scale) == {"none", "pi", "ntk", "yarn"} and set(target.finetune_steps) == {0, 1}
    assert set(target["extrapolation.factor"]) == {2.0}
    ext = tables["extrapolation_text"]
    assert sorted(ext.seed.unique()) == [0, 1]
    # experiment=extrapolation's default scales are all that apply (LongRoPE only with its lists)
    assert set(zip(ext.pe, ext.scale)) == {
        ("alibi", "none"),
        ("rope", "none"),
        ("rope", "pi"),
        ("rope", "ntk"),
        ("rope", "yarn"),
        ("rope", "dynamic"),
        ("rope", "llama3"),
    }
    assert ext[["16", "32"]].notna().all().all()
    assert set(tables["resolution"].pe) == {"nope", "learned"} and set(tables["resolution_similarity"].pe) == {
        "learned"
    }
    assert sorted(tables["check"].seed.unique()) == [0, 1]
    # extrapolation_target's RoPE is extrapolation_text's: trained once, in the suite's cache
    for run in pd.read_csv(suite_dir / meta["sweeps"]["extrapolation_target"]["dir"] / "runs.csv").run_dir:
        models = json.loads((Path(run) / "summary.json").read_text())["models"]
        assert {m["reused"] for m in models} == {True} and {Path(m["cache"]).parent for m in models} == {
            (suite_dir / "cache").resolve()
        }
    assert not list(suite_dir.glob("sweeps/*/*/cache")) and "cache_dir" not in ext
    for name in ("extrapolation_text", "extrapolation_target", "extrapolation_passkey", "resolution"):
        assert {"steps", "criterion", "target", "reached_target", "target_step"} <= set(tables[name]), name

    # the report again from the finished folder: the same tables
    again = tmp_path / "again"
    result = runner.invoke(app, ["suite", "--report-from", str(suite_dir), "--out", str(again)])
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(pd.read_csv(again / "suite" / "extrapolation_text.csv"), ext)


def test_a_suite_runs_sweep_by_sweep_into_one_folder(tmp_path):
    """--only NAME --into DIR: the second sweep joins the first one's folder, reads its models from
    that folder's cache, and the report holds both sweeps' tables; the suite's seconds add up."""
    suite = tiny_suite(tmp_path / "tiny.yaml")
    res, out = tmp_path / "res", tmp_path / "out"
    first = ["suite", "--suite", str(suite), "--results-dir", str(res), "--out", str(out)]
    result = runner.invoke(app, [*first, "--only", "extrapolation_text"])
    assert result.exit_code == 0, result.output
    (suite_dir,) = (res / "suites").iterdir()
    assert "extrapolation_target" in json.loads((suite_dir / "suite.json").read_text())["left_out"]
    result = runner.invoke(app, [*first, "--only", "extrapolation_target", "--into", str(suite_dir)])
    assert result.exit_code == 0, result.output
    assert [p.name for p in (res / "suites").iterdir()] == [suite_dir.name]
    meta = json.loads((suite_dir / "suite.json").read_text())
    assert set(meta["sweeps"]) == {"extrapolation_text", "extrapolation_target"}
    assert "extrapolation_target" not in meta["left_out"] and "order" in meta["left_out"]
    assert meta["seconds"] == pytest.approx(sum(s["seconds"] for s in meta["sweeps"].values()))
    for run in pd.read_csv(suite_dir / meta["sweeps"]["extrapolation_target"]["dir"] / "runs.csv").run_dir:
        models = json.loads((Path(run) / "summary.json").read_text())["models"]
        assert {m["reused"] for m in models} == {True}
    assert {"extrapolation_text.csv", "extrapolation_target.csv"} <= {p.name for p in (out / "suite").iterdir()}

    # a sweep the folder holds already, another suite's folder, other seeds: one line, nothing run
    before = sorted(p.name for p in suite_dir.rglob("*"))
    for args, message in [
        (["--only", "extrapolation_text"], f"error: '{suite_dir}' has run the sweep extrapolation_text already"),
        (["--only", "check", "--seeds", "0"], f"error: '{suite_dir}' ran seeds [0, 1]; these sweeps plan [0]"),
    ]:
        result = runner.invoke(app, [*first, *args, "--into", str(suite_dir)])
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split())
    result = runner.invoke(app, ["suite", "--quick", "--only", "check", "--into", str(suite_dir)])
    assert result.exit_code == 2
    assert f"error: '{suite_dir}' holds the suite 'tiny', not 'quick'" in " ".join(result.output.split())
    assert sorted(p.name for p in suite_dir.rglob("*")) == before


def test_every_job_of_a_suite_gets_the_suite_cache_folder(tmp_path):
    """posenc suite runs each sweep in its own folder and each job in its own results root; the
    override cache_dir=<suite folder>/cache makes them share their trained models."""
    from posenc.engine.config import compose
    from posenc.launch.suite import create, load, plan, read

    suite = load(str(tiny_suite(tmp_path / "tiny.yaml")))
    planned = plan(suite, only=["extrapolation_text", "extrapolation_target"])
    suite_dir = create(tmp_path / "res", suite, planned, "basic")
    shared = f"cache_dir='{(suite_dir / 'cache').resolve()}'"
    assert [job[-1] for p in planned for job in p.jobs] == [shared] * 6
    assert all(s["overrides"][-1] == shared for s in read(suite_dir)["sweeps"].values())
    assert compose(planned[1].jobs[0]).cache_dir == str((suite_dir / "cache").resolve())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--suite", "nothere"],
            "error: unknown suite 'nothere'; valid: algorithmic, full, quick, standard, or a path to a .yaml file",
        ),
        (
            ["--quick", "--only", "nothere"],
            "error: suite 'quick' has no sweep 'nothere'; its sweeps: extrapolation_text, "
            "extrapolation_target, extrapolation_passkey, resolution, resolution_relational, order, check",
        ),
        (["--quick", "--seeds", "a,b"], "error: --seeds 'a,b' is not a comma list of integers"),
        (["--quick", "--launcher", "nothere"], "error: unknown launcher 'nothere'; valid:"),
        (["--quick", "--suite", "full"], "error: give --quick or --suite, not both"),
        (["--report-from", "."], "error: '.' is not a suite directory or a report's suite/ folder (no suite.json)"),
        (
            ["--report-from", ".", "--quick"],
            "error: --report-from writes the report of a finished suite; it takes no other run option",
        ),
        (
            ["--quick", "pe=nothere"],
            "error: suite sweep extrapolation_text: job seed=0: unknown pe 'nothere'; valid: alibi",
        ),
        (["--suite", "missing.yaml"], "error: suite file 'missing.yaml' does not exist"),
    ],
)
def test_mistakes_stop_before_any_work(tmp_path, args, message):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "keep.txt").write_text("untouched")
    result = runner.invoke(app, ["suite", *args, "--results-dir", str(tmp_path / "results")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["keep.txt"]


def test_a_bad_override_in_a_suite_file_names_the_sweep(tmp_path):
    suite = tiny_suite(tmp_path / "tiny.yaml", extra=["model.nothere=1"])
    result = runner.invoke(app, ["suite", "--suite", str(suite), "--dry-run", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "suite sweep extrapolation_text:" in result.output and "nothere" in result.output


def test_select_picks_options_by_their_class_facts():
    assert selected("pe", {"ndim": 2, "encodes": "absolute"}, "here") == ["learned2d", "sincos2d"]
    assert selected("pe", [{"encodes": "nothing"}, "rope"], "here") == ["nope", "rope"]
    assert selected("scale", {"length_dependent": True}, "here") == options_where("scale", lambda c: c.length_dependent)


@pytest.mark.parametrize(
    ("select", "message"),
    [
        (
            {"pe": {"dims": 1}},
            "suite sweep check: pe classes have no fact 'dims'; valid: adds_bias, adds_embedding, "
            "counterpart, encodes, grid_methods, has_key_bias, ndim, rotates_qk",
        ),
        ({"pe": {"ndim": 3}}, "suite sweep check: select pe {'ndim': 3} matches no option"),
        ({"pe": "nothere"}, "suite sweep check: unknown pe 'nothere'; valid: alibi"),
        ({"pe": [1]}, "suite sweep check: select pe takes facts ({ndim: 1}), option names or a list of them, not 1"),
    ],
)
def test_a_bad_select_in_a_suite_file_is_one_line(tmp_path, select, message):
    suite = tmp_path / "sel.yaml"
    suite.write_text(
        json.dumps({"seeds": [0], "sweeps": {"check": {"select": select, "overrides": ["experiment=check"]}}})
    )
    result = runner.invoke(app, ["suite", "--suite", str(suite), "--dry-run", "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "r").exists()


def test_a_control_that_names_no_scheme_is_one_line(tmp_path):
    suite = tmp_path / "ctl.yaml"
    suite.write_text(
        json.dumps(
            {
                "seeds": [0],
                "sweeps": {"check": {"controls": {"bidirectional nop": "a typo"}, "overrides": ["experiment=check"]}},
            }
        )
    )
    result = runner.invoke(app, ["suite", "--suite", str(suite), "--dry-run", "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert "suite sweep check: control 'bidirectional nop' names no scheme; valid: alibi" in " ".join(
        result.output.split()
    )
    assert not (tmp_path / "r").exists()


ROOT = Path(__file__).resolve().parents[2]


def _body(report: Path) -> str:
    return report.read_text().rsplit("\n---\nWritten ", 1)[0]


def test_a_report_reads_a_committed_report_folder_and_the_sweeps_run_since(tmp_path):
    """--report-from A --report-from B: a committed report's suite/ folder (one sweep) and a new
    suite folder (another sweep) give one report with both sweeps' tables and added seconds;
    the same sweep in both, another suite, or other seeds is one line, exit 2, nothing written."""
    suite = tiny_suite(tmp_path / "tiny.yaml")
    res, out = tmp_path / "res", tmp_path / "out"
    first = ["suite", "--suite", str(suite), "--results-dir", str(res)]
    result = runner.invoke(app, [*first, "--only", "extrapolation_text", "--out", str(out)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, [*first, "--only", "check", "--out", str(tmp_path / "elsewhere")])
    assert result.exit_code == 0, result.output
    (later,) = [
        d for d in (res / "suites").iterdir() if "check" in json.loads((d / "suite.json").read_text())["sweeps"]
    ]
    both = tmp_path / "both"
    result = runner.invoke(
        app, ["suite", "--report-from", str(out / "suite"), "--report-from", str(later), "--out", str(both)]
    )
    assert result.exit_code == 0, result.output
    meta = json.loads((both / "suite" / "suite.json").read_text())
    assert set(meta["sweeps"]) == {"extrapolation_text", "check"}
    assert (
        "check" not in meta["left_out"] and "extrapolation_text" not in meta["left_out"] and "order" in meta["left_out"]
    )
    took = [json.loads((d / "suite.json").read_text())["seconds"] for d in (out / "suite", later)]
    assert meta["seconds"] == pytest.approx(sum(took))
    for name in ("extrapolation_text", "check"):
        pd.testing.assert_frame_equal(
            pd.read_csv(both / "suite" / f"{name}.csv"),
            pd.read_csv((out if name == "extrapolation_text" else tmp_path / "elsewhere") / "suite" / f"{name}.csv"),
        )
    assert "check" in (both / "REPORT.md").read_text()

    other = tmp_path / "other"
    other.mkdir()
    record = json.loads((later / "suite.json").read_text())
    for change, message in [
        ({}, f"error: the sweep check ran in both '{later}' and '{other}'; give one of them"),
        ({"seeds": [0]}, f"error: '{other}' ran seeds [0], '{later}' ran seeds [0, 1]"),
        ({"suite": "quick"}, f"error: '{other}' holds the suite 'quick', '{later}' the suite 'tiny'"),
    ]:
        (other / "suite.json").write_text(json.dumps({**record, **change}))
        result = runner.invoke(
            app, ["suite", "--report-from", str(later), "--report-from", str(other), "--out", str(tmp_path / "no")]
        )
        assert result.exit_code == 2, result.output
        assert " ".join(result.output.split()) == message
    assert not (tmp_path / "no").exists()


def test_the_committed_report_is_what_the_code_writes_from_the_committed_tables(tmp_path):
    result = runner.invoke(app, ["suite", "--report-from", str(ROOT / "results" / "suite"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert _body(tmp_path / "REPORT.md") == _body(ROOT / "results" / "REPORT.md")
    # the same values to 1e-12: numpy 1.24 (the floor) sums some of them an ulp apart from numpy 2,
    # and pandas 2.0 writes floats with 17 digits where later versions write the shortest repr
    for name in ("extrapolation_text", "resolution", "check"):
        written, committed = (
            pd.read_csv(folder / f"{name}.csv", float_precision="round_trip")
            for folder in (tmp_path / "suite", ROOT / "results" / "suite")
        )
        pd.testing.assert_frame_equal(written, committed, check_exact=False, rtol=1e-12, atol=0)


def test_a_report_folder_without_a_table_it_names_is_one_line(tmp_path):
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "suite.json").write_text(json.dumps({"suite": "x", "tables": ["order"]}))
    result = runner.invoke(app, ["suite", "--report-from", str(folder), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: '{folder}': suite.json names the table order.csv, which is not there"
    assert not (tmp_path / "out").exists()


def test_list_names_the_suites():
    result = runner.invoke(app, ["list", "suite"])
    assert result.exit_code == 0, result.output
    assert "quick" in result.output and "full" in result.output and "20 min on 2 CPU cores" in result.output


def test_a_suite_whose_sweeps_fill_no_table_the_report_reads_stops_before_any_work(tmp_path):
    """configs/suite/quick.yaml with extrapolation_text renamed: with `table:` it plans as before;
    without, it stops in one line naming the table and the sweep that fills it."""
    import yaml

    node = yaml.safe_load((ROOT / "configs" / "suite" / "quick.yaml").read_text())
    node["sweeps"] = {("text_lm" if k == "extrapolation_text" else k): v for k, v in node["sweeps"].items()}
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text(yaml.safe_dump(node))
    node["sweeps"]["text_lm"]["table"] = "extrapolation_text"
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump(node))
    result = runner.invoke(app, ["suite", "--suite", str(unnamed), "--dry-run", "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == (
        "error: the report reads the table 'extrapolation_text', which no sweep of the suite fills: give the sweep "
        "that runs experiment=extrapolation task=text the line `table: extrapolation_text`; the suite fills "
        "text_lm (text_lm), which the report does not read"
    )
    result = runner.invoke(
        app, ["suite", "--suite", str(named), "--dry-run", "--only", "check", "--results-dir", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    assert "suite named: 3 jobs in 1 sweeps" in result.output
    assert not (tmp_path / "r").exists()
