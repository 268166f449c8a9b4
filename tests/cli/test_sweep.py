"""`posenc sweep`: a real Hydra multirun (basic in-process, submitit's local executor in
subprocesses), the runs and statistics tables, requeue after preemption, and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats as scipy_stats
from sweep_checks import check_resumed_like_reference
from typer.testing import CliRunner

from posenc.cli.app import app
from posenc.engine.config import compose, list_options
from posenc.engine.results import RunDir, config_hash, flatten

ROOT = Path(__file__).resolve().parents[2]
TINY = ["experiment=smoke", "train.steps=3", "train.log_every=1", "eval.max_windows=2", "eval.periodic_windows=2"]


def only(folder: Path) -> Path:
    (entry,) = [p for p in folder.iterdir() if p.is_dir()]
    return entry


def check_two_by_two(sweep_dir: Path) -> None:
    """4 completed jobs, each an ordinary run dir with exactly `posenc train`'s config, and
    statistics over the two seeds of each scheme."""
    sweep = json.loads((sweep_dir / "sweep.json").read_text())
    assert len(sweep["jobs"]) == 4
    runs = pd.read_csv(sweep_dir / "runs.csv")
    assert runs["status"].tolist() == ["completed"] * 4
    assert runs[["pe", "seed"]].values.tolist() == [["rope", 0], ["rope", 1], ["nope", 0], ["nope", 1]]
    for job, row in runs.iterrows():
        run = Path(row["run_dir"])
        assert run.parent == sweep_dir / str(job) / "runs"
        assert {"config.yaml", "metrics.jsonl", "summary.json", "table.csv", "checkpoint"} <= {
            p.name for p in run.iterdir()
        }
        # the same config (hence hash) as `posenc train` with these overrides
        expected = compose(sweep["jobs"][job])
        from posenc.engine.config import to_container

        assert RunDir(run).read_summary()["config_hash"] == config_hash(to_container(expected))
        assert pd.read_csv(run / "table.csv")["val_loss"].item() == row["val_loss"]

    table = pd.read_csv(sweep_dir / "stats.csv")
    val = table[table["metric"] == "val_loss"].set_index("pe")
    assert sorted(val.index) == ["nope", "rope"]
    for pe in ("rope", "nope"):
        values = runs.loc[runs["pe"] == pe, "val_loss"].to_numpy()
        assert val.loc[pe, "n"] == 2 and val.loc[pe, "failed"] == 0
        assert val.loc[pe, "mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert val.loc[pe, "std"] == pytest.approx(values.std(ddof=1), rel=1e-9)
        low, high = scipy_stats.t.interval(0.95, 1, loc=values.mean(), scale=values.std(ddof=1) / 2**0.5)
        assert (val.loc[pe, "ci95_low"], val.loc[pe, "ci95_high"]) == pytest.approx((low, high), rel=1e-9)
    assert (sweep_dir / "runs.md").read_text().count("| completed |") == 4


def test_basic_launcher_runs_two_seeds_by_two_schemes(tmp_path):
    result = CliRunner().invoke(app, ["sweep", *TINY, "pe=rope,nope", "seed=0,1", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    sweep_dir = only(tmp_path / "sweeps")
    check_two_by_two(sweep_dir)
    assert (sweep_dir / "multirun.yaml").exists() and (sweep_dir / "0" / ".hydra" / "overrides.yaml").exists()
    assert not (tmp_path / "runs").exists()  # every run lives in its job folder


def test_glob_sweeps_one_job_per_matching_scheme_numbered_as_hydra(tmp_path):
    """Before, any glob() failed with Hydra's "ConfigLoader is not set"."""
    one_d = [o for o in list_options("pe") if "2d" not in o]
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            *TINY,
            "pe=glob(*,exclude=[rope2d*,learned2d,sincos2d,rel2d,alibi2d])",
            "--results-dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    sweep_dir = only(tmp_path / "sweeps")
    runs = pd.read_csv(sweep_dir / "runs.csv")
    assert runs["pe"].tolist() == one_d and runs["status"].tolist() == ["completed"] * len(one_d)
    for job, pe in enumerate(one_d):  # job i is Hydra's folder i, and its run is that scheme's
        overrides = (sweep_dir / str(job) / ".hydra" / "overrides.yaml").read_text()
        assert f"- pe={pe}\n" in overrides
        assert RunDir(Path(runs["run_dir"][job])).read_config()["choices"]["pe"] == pe


def test_a_glob_keeps_the_schemes_that_fit_the_model_and_says_which_it_left_out(tmp_path):
    """The issue's example: on the causal LM, rope* matches rope and the two ViT schemes."""
    result = CliRunner().invoke(
        app, ["sweep", *TINY, "pe=glob(rope*)", "train.steps=2", "--results-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for left in ("rope2d_axial", "rope2d_mixed"):
        assert f"left out pe={left} (a glob matched it): pe '{left}' is a 2D scheme for ViT patches" in result.output
    sweep_dir = only(tmp_path / "sweeps")
    runs = pd.read_csv(sweep_dir / "runs.csv")
    assert runs["pe"].tolist() == ["rope"] and runs["status"].tolist() == ["completed"]
    (job,) = json.loads((sweep_dir / "sweep.json").read_text())["jobs"]
    assert job == ["experiment=smoke", "train.steps=2", *TINY[2:], "pe=rope"]  # a key given twice: its last value


def test_a_comma_list_that_names_a_scheme_that_does_not_fit_stops_the_sweep(tmp_path):
    result = CliRunner().invoke(app, ["sweep", *TINY, "pe=rope,rope2d_axial", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "job pe=rope2d_axial: pe 'rope2d_axial' is a 2D scheme for ViT patches" in result.output
    assert not (tmp_path / "sweeps").exists()


def test_a_glob_none_of_whose_options_fit_stops_the_sweep(tmp_path):
    result = CliRunner().invoke(app, ["sweep", *TINY, "pe=glob(rope2d*)", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2 and "is a 2D scheme for ViT patches" in result.output
    assert not (tmp_path / "sweeps").exists()


def test_range_and_a_glob_of_one_option(tmp_path):
    result = CliRunner().invoke(
        app, ["sweep", *TINY, "pe=glob(rope)", "seed=range(0,2)", "--results-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    sweep_dir = only(tmp_path / "sweeps")
    assert json.loads((sweep_dir / "sweep.json").read_text())["jobs"] == [
        [*TINY, "pe=rope", f"seed={s}"] for s in (0, 1)
    ]
    assert pd.read_csv(sweep_dir / "runs.csv")["status"].tolist() == ["completed"] * 2


def posenc(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "posenc", *args],
        cwd=ROOT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_submitit_local_launcher_runs_two_seeds_by_two_schemes_and_marks_a_failed_job(tmp_path):
    proc = posenc(
        "sweep", *TINY, "pe=rope,nope", "seed=0,1", "--launcher", "submitit_local", "--results-dir", str(tmp_path)
    )
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    sweep_dir = only(tmp_path / "sweeps")
    check_two_by_two(sweep_dir)
    assert len(list(sweep_dir.glob(".submitit/*/*_result.pkl"))) == 4  # four real submitit jobs

    # a job that diverges is listed, marked failed with its error line, and counted in the statistics
    proc = posenc(
        "sweep", *TINY, "train.lr=3e-3,1e12", "--launcher", "submitit_local", "--results-dir", str(tmp_path / "bad")
    )
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1].startswith("error: 1 of 2 jobs did not complete; see ")
    sweep_dir = only(tmp_path / "bad" / "sweeps")
    runs = pd.read_csv(sweep_dir / "runs.csv", keep_default_na=False)
    assert runs["status"].tolist() == ["completed", "failed"]
    assert runs["error"].tolist() == [
        "",
        "TrainingDiverged: loss became nan at step 2; lower train.lr or check the data",
    ]
    table = pd.read_csv(sweep_dir / "stats.csv")
    assert table.loc[table["metric"] == "val_loss", ["train.lr", "n", "failed"]].values.tolist() == [
        [3e-3, 1, 0],
        [1e12, 0, 1],
    ]


@pytest.mark.slow
def test_a_preempted_submitit_job_is_requeued_and_resumes_to_the_uninterrupted_metrics(tmp_path):
    args = [
        "experiment=smoke",
        "train.steps=40",
        "train.checkpoint_every=3",
        "train.eval_every=4",
        "train.log_every=2",
        "eval.max_windows=4",
        "eval.periodic_windows=4",
    ]
    reference = posenc("train", "-q", *args, "--results-dir", str(tmp_path / "reference"))
    sweep = posenc("sweep", *args, "seed=0", "--launcher", "submitit_local", "--results-dir", str(tmp_path))
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob("sweeps/*/0/runs/*/checkpoint/trainer.pt")):
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.05)
    sweep_dir = only(tmp_path / "sweeps")
    task = [
        p
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _cmdline(p).count("submitit.core._submit") and str(sweep_dir) in _cmdline(p)
    ]
    assert len(task) == 1
    os.kill(int(task[0].name), signal.SIGUSR2)  # what SLURM sends before preempting or timing out
    _, err = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, err
    assert reference.wait(timeout=300) == 0

    check_resumed_like_reference(sweep_dir, tmp_path / "reference" / "runs")


@pytest.mark.slow
def test_sigterm_on_a_joblib_sweep_stops_its_workers_too(tmp_path):
    """Killed by its default handler, the launching process left loky's workers training on."""
    sweep = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "posenc",
            "sweep",
            "experiment=smoke",
            "train.steps=100000",
            "seed=0,1",
            "--launcher",
            "joblib",
            "hydra.launcher.n_jobs=2",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while len(list(tmp_path.glob("sweeps/*/*/runs/*/summary.json"))) < 2:  # both workers train
            assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
            time.sleep(0.05)
        sweep.send_signal(signal.SIGTERM)
        sweep.wait(timeout=60)
        deadline = time.monotonic() + 20
        while _group_alive(sweep.pid):
            assert time.monotonic() < deadline, "the sweep's workers outlived it"
            time.sleep(0.1)
        err = sweep.stderr.read()  # its workers held the pipe open too
        assert sweep.returncode == 128 + signal.SIGTERM, err
        assert err.strip().splitlines()[-1].startswith("error: stopped by SIGTERM: the launcher's workers are stopped")
    finally:
        if _group_alive(sweep.pid):
            os.killpg(sweep.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["--launcher", "sge"], "error: unknown launcher 'sge'; valid: basic, joblib, submitit_local, submitit_slurm"),
        (["pe=rope,foo"], f"error: job pe=foo: unknown pe 'foo'; valid: {', '.join(list_options('pe'))}"),
        (
            ["pe=rope", "protocol._target_=posenc.experiments.nothere.Run"],
            "error: protocol._target_: cannot import 'posenc.experiments.nothere.Run' "
            "(No module named 'posenc.experiments.nothere')",
        ),
        (
            ["protocol._target_=pathlib.Path"],
            "error: protocol._target_: 'pathlib.Path' is not an experiment protocol "
            "(a class with tables, check(cfg) and run(cfg, ctx))",
        ),
        (
            ["protocol=posenc.experiments.train.run"],
            "error: protocol: expected a node naming a protocol class, such as "
            "{_target_: posenc.experiments.train.Train}; got 'posenc.experiments.train.run'",
        ),
        (
            ["pe=rope,rope2d_axial"],  # a comma list names its options on purpose: a misfit stops the sweep
            "error: job pe=rope2d_axial: pe 'rope2d_axial' is a 2D scheme for ViT patches; "
            "on the causal LM use pe=rope",
        ),
        (["pe=glob(zzz*)"], f"error: 'pe=glob(zzz*)' matches no pe option; valid: {', '.join(list_options('pe'))}"),
        (["train.lr=1e-3,abc"], "error: job train.lr=abc: train.lr: expected float, got 'abc'"),
        (
            ["--launcher", "submitit_local", "hydra.launcher.partition=gpu"],
            "error: launcher submitit_local: Could not override 'hydra.launcher.partition'.",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, args, message):
    result = CliRunner().invoke(app, ["sweep", *TINY, *args, "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [message]
    assert not tmp_path.joinpath("sweeps").exists()


def test_a_launcher_whose_plugin_is_missing_names_the_extra(tmp_path, monkeypatch):
    from posenc.launch import sweep

    monkeypatch.setitem(sweep.PLUGIN_LAUNCHERS, "joblib", ("hydra_plugins.not_installed_here", "cluster"))
    result = CliRunner().invoke(app, ["sweep", *TINY, "--launcher", "joblib", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: launcher 'joblib' needs the 'cluster' extra (not_installed_here is not installed): "
        "pip install 'posenc[cluster]' (or -e \".[cluster]\" in a checkout)"
    ]
    assert "joblib" not in sweep.launchers()
    assert not tmp_path.joinpath("sweeps").exists()


def test_the_basic_launcher_needs_no_plugin_package_at_all(tmp_path, monkeypatch):
    """On the base install (no [cluster] extra) even the plugins' parent package hydra_plugins is
    missing: importlib.util.find_spec of a dotted name then raises instead of returning None."""
    from posenc.launch import sweep

    monkeypatch.setitem(sweep.PLUGIN_LAUNCHERS, "joblib", ("no_such_parent.hydra_joblib_launcher", "cluster"))
    assert "joblib" not in sweep.launchers() and "basic" in sweep.launchers()
    result = CliRunner().invoke(app, ["sweep", *TINY, "--launcher", "joblib", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2 and "needs the 'cluster' extra" in result.output
    sweep.check_launcher("basic", [])  # no error


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["experiment=extrapolation", "pe=rope,nope", "extrapolation.scales=[pi]"],
            "error: job pe=nope: no scale of extrapolation.scales (pi) applies to pe 'nope'",
        ),
        (["experiment=extrapolation", "extrapolation.lengths=[0]"], "error: evaluation length must be >= 1, got 0"),
        (
            ["experiment=resolution", "pe=learned", "resolution.methods=[foo]"],
            "error: unknown interpolation method 'foo'; valid: nearest, bilinear, bicubic, area, clip, extrapolate, "
            "interpolate, none",
        ),
        (["experiment=order", "order.permutations=0"], "error: order.permutations must be >= 1, got 0"),
        (
            ["experiment=check", "check.pes=[nothere]"],
            f"error: unknown pe 'nothere'; valid: {', '.join(list_options('pe'))}",
        ),
    ],
)
def test_a_protocol_checks_its_own_settings_before_any_job(tmp_path, args, message):
    result = CliRunner().invoke(app, ["sweep", *args, "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [message]
    assert not tmp_path.joinpath("sweeps").exists()


def test_submitit_slurm_without_slurm_submits_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    result = CliRunner().invoke(
        app, ["sweep", *TINY, "pe=rope,nope", "--launcher", "submitit_slurm", "--results-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: launcher 'submitit_slurm' needs SLURM, but 'sbatch' is not on PATH; "
        "on this machine use basic, joblib or submitit_local"
    ]
    assert not tmp_path.joinpath("sweeps").exists()


FAKE_SBATCH = """#!/bin/sh
for a in "$@"; do last="$a"; done
cp "$last" "$FAKE_SBATCH_RECORD"
echo "sbatch: error: this is not a cluster" >&2
exit 1
"""


# sinfo --noheader --Node --format=%P|%c|%m|%G on a cluster with a GPU partition (the default) and a CPU one
FAKE_SINFO = """#!/bin/sh
printf 'gpu*|8|64000|gpu:a100:4(S:0-1)\\ncpu|32|128000|(null)\\ngpu*|8|64000|gpu:2\\n'
"""
DOWN_SINFO = """#!/bin/sh
echo "slurm_load_partitions: Unable to contact slurm controller (connect failure)" >&2
exit 1
"""


def fake_slurm(tmp_path: Path, monkeypatch, sinfo: str = FAKE_SINFO) -> None:
    """sbatch (records its script, then refuses), srun and sinfo on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "sinfo").write_text(sinfo)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SBATCH_RECORD", str(tmp_path / "script.sh"))


def test_submitit_slurm_hands_sbatch_the_settings_of_the_config_tree_and_the_command_line(tmp_path, monkeypatch):
    fake_slurm(tmp_path, monkeypatch)
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            *TINY,
            "pe=rope,nope",
            "seed=0,1,2",
            "--launcher",
            "submitit_slurm",
            "hydra.launcher.partition=gpu",
            "hydra.launcher.array_parallelism=3",
            "--results-dir",
            str(tmp_path / "results"),
        ],
    )
    assert result.exit_code == 1  # the fake sbatch refused: the launcher stops, nothing ran
    script = (tmp_path / "script.sh").read_text().splitlines()
    for line in [
        "#SBATCH --array=0-5%3",
        "#SBATCH --partition=gpu",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=32GB",
        "#SBATCH --time=240",
        "#SBATCH --signal=USR2@120",
        "#SBATCH --job-name=posenc",
    ]:
        assert line in script
    assert not list((tmp_path / "results").glob("sweeps/*/*/runs"))


@pytest.mark.filterwarnings("ignore:(?s).*is validated against ConfigStore schema")
def test_slurm_settings_live_in_the_config_tree_and_take_overrides():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="posenc.configs", version_base="1.3"):
        cfg = hydra_compose(
            "config",
            return_hydra_config=True,
            overrides=[
                "hydra/launcher=submitit_slurm",
                "hydra.launcher.partition=gpu",
                "hydra.launcher.gpus_per_node=4",
                "hydra.launcher.array_parallelism=8",
            ],
        )
    launcher = flatten(dict(cfg.hydra.launcher))
    assert launcher["_target_"] == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (launcher["partition"], launcher["gpus_per_node"], launcher["array_parallelism"]) == ("gpu", 4, 8)
    assert (launcher["cpus_per_task"], launcher["mem_gb"], launcher["timeout_min"]) == (8, 32, 240)
    assert launcher["max_num_timeout"] >= 1  # preempted jobs are requeued


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            ["hydra.launcher.partition=nosuch"],
            "error: hydra.launcher.partition: no partition 'nosuch' on this cluster; valid: cpu, gpu",
        ),
        (
            ["hydra.launcher.timeout_min=2"],
            "error: hydra.launcher.timeout_min=2 (120 s) must be above "
            "hydra.launcher.signal_delay_s=120 (SLURM signals a "
            "job to checkpoint that long before its time limit); raise timeout_min or lower signal_delay_s",
        ),
        (
            ["hydra.launcher.partition=gpu", "hydra.launcher.cpus_per_task=9"],
            "error: hydra.launcher.cpus_per_task=9: no node of gpu has that many; the largest has 8 CPUs",
        ),
        (
            ["hydra.launcher.partition=cpu"],  # the default gpus_per_node=1
            "error: hydra.launcher.gpus_per_node=1: no node of cpu has that many; the largest has 0 GPUs",
        ),
        (
            ["hydra.launcher.gpus_per_node=5"],
            "error: hydra.launcher.gpus_per_node=5: no node of the default partition "
            "has that many; the largest has 4 GPUs",
        ),
        (
            ["hydra.launcher.mem_gb=63"],
            "error: hydra.launcher.mem_gb=63: no node of the default partition has that many; "
            "the largest has 64000 MB of memory",
        ),
    ],
)
def test_slurm_settings_that_cannot_run_on_the_cluster_are_one_line_and_submit_nothing(
    tmp_path, monkeypatch, settings, message
):
    fake_slurm(tmp_path, monkeypatch)
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            *TINY,
            "pe=rope,nope",
            "--launcher",
            "submitit_slurm",
            *settings,
            "--results-dir",
            str(tmp_path / "results"),
        ],
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [message]
    assert not (tmp_path / "script.sh").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "sinfo, message",
    [
        (
            DOWN_SINFO,
            "error: cannot ask SLURM about its nodes (sinfo): slurm_load_partitions: Unable to contact slurm "
            "controller (connect failure)",
        ),
        (
            FAKE_SINFO.replace("*", ""),
            "error: hydra.launcher.partition is not set and this cluster has no default "
            "partition; set it to one of: cpu, gpu",
        ),
    ],
    ids=["controller-down", "no-default-partition"],
)
def test_a_cluster_that_cannot_say_where_jobs_go_is_one_line_and_submits_nothing(tmp_path, monkeypatch, sinfo, message):
    fake_slurm(tmp_path, monkeypatch, sinfo=sinfo)
    result = CliRunner().invoke(
        app, ["sweep", *TINY, "--launcher", "submitit_slurm", "--results-dir", str(tmp_path / "results")]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [message]
    assert not (tmp_path / "script.sh").exists() and not (tmp_path / "results").exists()


def test_a_job_that_fails_mid_run_is_marked_once_and_one_before_its_run_folder_in_error_json(tmp_path, monkeypatch):
    result = CliRunner().invoke(app, ["sweep", *TINY, "train.lr=3e-3,1e12", "--results-dir", str(tmp_path / "a")])
    assert result.exit_code == 1
    sweep_dir = only(tmp_path / "a" / "sweeps")
    runs = pd.read_csv(sweep_dir / "runs.csv", keep_default_na=False)
    assert runs["status"].tolist() == ["completed", "failed"]
    error = "TrainingDiverged: loss became nan at step 2; lower train.lr or check the data"
    assert runs["error"].tolist() == ["", error]
    summary = RunDir(Path(runs["run_dir"][1])).read_summary()  # marked once, by the run context
    assert summary["status"] == "failed" and summary["error"] == error
    assert not (sweep_dir / "1" / "error.json").exists()
    assert json.loads((sweep_dir / "1" / "job.json").read_text())["table"] == "table"

    from posenc.experiments.train import Train

    def broken(self, cfg, ctx):
        raise RuntimeError("before any run folder")

    monkeypatch.setattr(Train, "run", broken)
    result = CliRunner().invoke(app, ["sweep", *TINY, "--results-dir", str(tmp_path / "b")])
    assert result.exit_code == 1
    sweep_dir = only(tmp_path / "b" / "sweeps")
    assert json.loads((sweep_dir / "0" / "error.json").read_text())["error"] == "RuntimeError: before any run folder"
    runs = pd.read_csv(sweep_dir / "runs.csv", keep_default_na=False)
    assert runs[["status", "error"]].values.tolist() == [["failed", "RuntimeError: before any run folder"]]
