"""Sweeps: a Hydra multirun whose jobs are ordinary run directories, and the tables listing them.

A sweep folder (``posenc sweep`` makes it, Hydra's launcher fills it)::

    <root>/sweeps/<timestamp>-<name>/
        sweep.json           launcher, overrides, and the planned jobs in Hydra's order
        multirun.yaml        Hydra's own record of the sweep
        runs.csv, runs.md    one row per job: overrides, status, error line, run dir, scores
        stats.csv, stats.md  jobs that differ only by seed: n, mean, std, 95% t interval
        <job>/               Hydra's job folder (.hydra/, log) and the job's results root:
            runs/<run>/      the run directory the experiment protocol made

Each job calls the protocol its config names (``protocol: posenc.experiments.train.run``; an
``experiment/*.yaml`` sets its own), a function ``fn(cfg, *, results_root, resume=None)``
returning ``(table, run_dir)``; a ``check_fn(cfg)`` beside it in its module checks a job's own
settings before any job starts. Because a job's results root is its own folder, a job that a
scheduler preempts and submitit requeues finds its run there and resumes it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import shutil
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from posenc.analysis.stats import aggregate
from posenc.core.errors import ConfigError, UserError
from posenc.core.io import write_json, write_table
from posenc.engine.results import RunDir, make_unique_dir

SWEEP_FILE = "sweep.json"
SCHEMA_WARNING = r"(?s).*is validated against ConfigStore schema"


# Launchers that come from a Hydra plugin outside hydra-core: the plugin's module, and the extra
# of posenc that installs it.
PLUGIN_LAUNCHERS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "cluster"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "cluster"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "cluster"),
}


def _plugin_installed(name: str) -> bool:
    module = PLUGIN_LAUNCHERS.get(name, (None,))[0]
    return module is None or importlib.util.find_spec(module) is not None


def launchers() -> list[str]:
    """The ``hydra/launcher`` options Hydra can see (its plugins and ``configs/hydra/launcher``)
    whose plugin is installed."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="posenc.configs", version_base="1.3"):
            options = GlobalHydra.instance().config_loader().get_group_options("hydra/launcher")
    finally:
        GlobalHydra.instance().clear()
    return sorted(o for o in options if _plugin_installed(o))


@contextmanager
def quiet_schema_matching() -> Iterator[None]:
    """configs/hydra/launcher/submitit_slurm.yaml is checked against the plugin's schema of the
    same name: Hydra 1.3 still does that, with a deprecation warning that says nothing to a user."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SCHEMA_WARNING, category=UserWarning)
        yield


def check_launcher(launcher: str, hydra_overrides: Sequence[str]) -> None:
    """The launcher exists and the Hydra overrides (``hydra.launcher.partition=gpu``) apply to it;
    for SLURM, its settings fit the cluster (``posenc.launch.slurm.check_settings``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    valid = launchers()
    if launcher in PLUGIN_LAUNCHERS and not _plugin_installed(launcher):
        module, extra = PLUGIN_LAUNCHERS[launcher]
        raise ConfigError(
            f"launcher '{launcher}' needs the '{extra}' extra ({module.split('.')[1]} is not installed): "
            f"pip install 'posenc[{extra}]' (or -e \".[{extra}]\" in a checkout)"
        )
    if launcher not in valid:
        raise ConfigError(f"unknown launcher '{launcher}'; valid: {', '.join(valid)}")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="posenc.configs", version_base="1.3"), quiet_schema_matching():
            cfg = hydra_compose(
                "config", overrides=[f"hydra/launcher={launcher}", *hydra_overrides], return_hydra_config=True
            )
    except Exception as e:  # Hydra raises several types; all mean an override that does not apply
        raise ConfigError(f"launcher {launcher}: {str(e).strip().splitlines()[0]}") from None
    finally:
        GlobalHydra.instance().clear()
    if launcher == "submitit_slurm":
        missing = [c for c in ("sbatch", "srun", "sinfo") if shutil.which(c) is None]
        if missing:
            raise ConfigError(
                f"launcher 'submitit_slurm' needs SLURM, but '{missing[0]}' is not on PATH; "
                "on this machine use basic, joblib or submitit_local"
            )
        from posenc.launch.slurm import check_settings

        check_settings(OmegaConf.to_container(cfg.hydra.launcher, resolve=False))


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(job overrides, Hydra overrides such as ``hydra.launcher.partition=gpu``)."""
    hydra = [o for o in overrides if o.lstrip("+~").startswith("hydra.") or o.lstrip("+~").startswith("hydra/")]
    return [o for o in overrides if o not in hydra], hydra


def expand(overrides: Sequence[str]) -> list[list[str]]:
    """Every job's overrides, in the order Hydra's basic sweeper numbers the jobs."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
        (jobs,) = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    except Exception as e:  # Hydra's parser and sweeper raise several types; all mean a bad override
        raise ConfigError(f"cannot parse sweep override: {str(e).splitlines()[0]}") from None
    return jobs


def check_jobs(jobs: Sequence[Sequence[str]]) -> None:
    """Compose and build every job's config now (``check_<protocol>`` where the protocol's module
    has one), so a mistake stops the sweep before any job."""
    from posenc.engine.build import build
    from posenc.engine.config import compose

    swept = [i for i in range(len(jobs[0]) if jobs else 0) if len({job[i] for job in jobs}) > 1]
    for job in jobs:
        try:
            cfg = compose(job)
            fn = protocol(cfg)
            # the protocol's own check builds what the job will build (experiment=extrapolation's
            # cells, one per scale); without one, the job builds the config as it is
            check = getattr(importlib.import_module(fn.__module__), f"check_{fn.__name__}", build)
            check(cfg)
        except ConfigError as e:
            where = " ".join(job[i] for i in swept)
            raise ConfigError(f"job {where}: {e}" if where else str(e)) from None


def create(root: Path, overrides: Sequence[str], launcher: str, jobs: Sequence[Sequence[str]]) -> Path:
    """A new sweep folder under ``<root>/sweeps/`` holding ``sweep.json``."""
    slug = "-".join(o.split("=")[0].replace("/", ".") for o in overrides if "," in o) or "sweep"
    path = make_unique_dir(Path(root) / "sweeps", f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}"[:120])
    write_json(
        path / SWEEP_FILE,
        {
            "launcher": launcher,
            "overrides": list(overrides),
            "jobs": [list(j) for j in jobs],
            "results_root": str(Path(root).resolve()),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    )
    return path


def job_run(job_dir: Path) -> Path | None:
    """The run directory of a job (None before the protocol made one)."""
    runs = sorted((Path(job_dir) / "runs").glob("*/config.yaml"))
    return runs[-1].parent if runs else None


def protocol(cfg: DictConfig) -> Callable[..., tuple[pd.DataFrame, RunDir]]:
    """The function the config's ``protocol`` key names."""
    name = str(cfg.get("protocol"))
    module, _, attr = name.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError):
        fn = None
    if not callable(fn):
        raise ConfigError(f"protocol: cannot import '{name}'; it names a function such as posenc.experiments.train.run")
    return fn


def run_protocol(cfg: DictConfig, results_root: Path, resume: Path | None = None) -> tuple[pd.DataFrame, RunDir]:
    """Call the protocol ``cfg.protocol`` names; ``resume`` only if the protocol takes it."""
    fn = protocol(cfg)
    if resume is not None and "resume" in inspect.signature(fn).parameters:
        return fn(cfg, results_root=results_root, resume=resume)
    return fn(cfg, results_root=results_root)


def run_job(cfg: DictConfig) -> dict[str, Any]:
    """The body of one sweep job, inside Hydra (``HydraConfig`` is set).

    Runs the protocol into the job's folder, or resumes the run already there (a requeued
    job). A failure is recorded (the run's summary says ``failed`` with its error line) and
    does not stop the sweep; a stop signal propagates so that submitit can requeue the job.
    """
    from hydra.core.hydra_config import HydraConfig

    from posenc.engine.config import with_choices

    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    cfg = with_choices(cfg, hc.runtime.choices)
    previous = job_run(job_dir)
    if previous is not None and RunDir(previous).read_summary().get("status") == "completed":
        return {"status": "completed", "run_dir": str(previous)}
    try:
        _, run = run_protocol(cfg, job_dir, resume=previous)
        status = {"status": "completed", "run_dir": str(run.path)}
    except Exception as e:
        status = {"status": "failed", "error": _error_line(e), "run_dir": str(job_run(job_dir) or "")}
        mark_failed(job_dir, status["error"])
    write_tables(Path(hc.sweep.dir))  # the listing is fresh whenever a job ends
    return status


def mark_failed(job_dir: Path, error: str) -> None:
    """Record a job's failure: in its run's summary (unless the protocol did), or in
    ``error.json`` when it failed before the protocol made a run directory."""
    run = job_run(job_dir)
    if run is None:
        write_json(Path(job_dir) / "error.json", {"status": "failed", "error": error, "run_dir": ""})
    elif RunDir(run).read_summary().get("status") != "failed":
        RunDir(run).update_summary(status="failed", error=error)


def _error_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def read_sweep(sweep_dir: Path) -> dict[str, Any]:
    path = Path(sweep_dir) / SWEEP_FILE
    if not path.is_file():
        raise UserError(f"'{sweep_dir}' is not a sweep directory (no {SWEEP_FILE})")
    return json.loads(path.read_text())


def _override_columns(job: Sequence[str]) -> dict[str, str]:
    return {o.lstrip("+~").split("=", 1)[0]: o.split("=", 1)[1] if "=" in o else "" for o in job}


def runs_table(sweep_dir: Path) -> pd.DataFrame:
    """One row per planned job: its overrides, status, error line, run directory and, for a
    completed run with a one-row table, that row's float columns (its scores)."""
    sweep = read_sweep(sweep_dir)
    rows = []
    for num, job in enumerate(sweep["jobs"]):
        job_dir = Path(sweep_dir) / str(num)
        run = job_run(job_dir)
        row: dict[str, Any] = {"job": num, **_override_columns(job), "status": "pending", "error": ""}
        if run is not None:
            summary = RunDir(run).read_summary()
            error = (summary.get("error") or "").strip().splitlines()
            row.update(status=summary.get("status", "running"), error=error[0] if error else "")
            row["run_dir"] = str(run)
            table_path = run_table(run)
            if row["status"] == "completed" and table_path.exists():
                table = pd.read_csv(table_path)
                if len(table) == 1:
                    row.update({k: v for k, v in table.iloc[0].items() if isinstance(v, float) and k not in row})
        elif (job_dir / "error.json").exists():
            row.update(status="failed", error=json.loads((job_dir / "error.json").read_text())["error"])
        elif job_dir.exists():
            row["status"] = "running"
        rows.append(row)
    return pd.DataFrame(rows)


def run_table(run: Path, name: str | None = None) -> Path:
    """A run's table ``name``.csv; by default its main table, which the summary names when it
    is not ``table`` (``posenc order`` writes ``order.csv``)."""
    return Path(run) / f"{name or RunDir(run).read_summary().get('table', 'table')}.csv"


def long_table(sweep_dir: Path, name: str | None = None) -> pd.DataFrame:
    """Every row of every job's table (its main table, or the table ``name`` such as
    ``similarity``), failed and unfinished jobs as one row without scores, with the job's
    override columns and status in front."""
    sweep = read_sweep(sweep_dir)
    parts = []
    for num, job in enumerate(sweep["jobs"]):
        run = job_run(Path(sweep_dir) / str(num))
        front = {"job": num, **_override_columns(job)}
        status = RunDir(run).read_summary().get("status") if run is not None else "pending"
        table_path = run_table(run, name) if run is not None else None
        if status == "completed" and table_path is not None and table_path.exists():
            table = pd.read_csv(table_path)
            table = table.drop(columns=[c for c in front if c in table.columns])
            parts.append(pd.concat([pd.DataFrame([front] * len(table)), table], axis=1).assign(status=status))
        else:
            parts.append(pd.DataFrame([{**front, "status": status}]))
    return pd.concat(parts, ignore_index=True)


def stats_table(sweep_dir: Path) -> pd.DataFrame:
    """Jobs that differ only by ``seed``: n, mean, std and 95% t interval of every float column."""
    sweep = read_sweep(sweep_dir)
    table = long_table(sweep_dir)
    override_keys = list(_override_columns(sweep["jobs"][0]) if sweep["jobs"] else {})
    # float scores and pass/fail flags (a flag's mean is the fraction of seeds where it holds)
    metrics = [
        c
        for c in table.columns
        if c not in override_keys
        and c not in ("job", "status")
        and c != "seed"
        and (pd.api.types.is_float_dtype(table[c]) or pd.api.types.is_bool_dtype(table[c]))
    ]
    # table columns that tell one run's rows apart (a length, a scaling method) are kept as keys
    identity = [
        c
        for c in table.columns
        if c not in override_keys
        and c not in metrics
        and c not in ("job", "status", "seed")
        and (table.groupby("job")[c].nunique() > 1).any()
    ]
    # a table's own key column named like an output column of ``aggregate`` (the extrapolation
    # table's ``metric``: bpb or ppl) is renamed, so that both stay readable
    taken = ("metric", "n", "mean", "std", "ci95_low", "ci95_high", "failed")
    renamed = {c: "measure" if c == "metric" else f"row_{c}" for c in identity if c in taken}
    keys = [k for k in override_keys if k != "seed"] + [renamed.get(c, c) for c in identity]
    return aggregate(table.rename(columns=renamed), keys, metrics)


def write_tables(sweep_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write ``runs.{csv,md}`` and ``stats.{csv,md}`` into the sweep folder and return them."""
    runs, stats = runs_table(sweep_dir), stats_table(sweep_dir)
    write_table(runs, Path(sweep_dir), "runs")
    write_table(stats, Path(sweep_dir), "stats")
    return runs, stats
