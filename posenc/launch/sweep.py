"""Sweeps: a Hydra multirun whose jobs are ordinary run directories, and the tables listing them.

A sweep folder (``posenc sweep`` makes it, Hydra's launcher fills it)::

    <root>/sweeps/<timestamp>-<name>/
        sweep.json           launcher, overrides, and the planned jobs in Hydra's order
        multirun.yaml        Hydra's own record of the sweep
        runs.csv, runs.md    one row per job: overrides, status, error line, run dir, scores
        stats.csv, stats.md  jobs that differ only by seed: n, mean, std, 95% t interval
        <job>/               Hydra's job folder (.hydra/, log) and the job's results root:
            job.json         the job's number, overrides, its protocol's tables, its SLURM id
            runs/<run>/      the run directory the experiment protocol made

Each job runs the protocol its config names (``protocol: {_target_: posenc.experiments.train.Train}``;
an ``experiment/*.yaml`` sets its own), a class with ``tables``, ``check(cfg)`` and
``run(cfg, ctx)`` (``posenc.engine.context.Experiment``). Every job's ``check`` runs before any job
starts. Because a job's results root is its own folder, a job that a scheduler preempts and
submitit requeues finds its run there and resumes it (``RunContext.resume``).

Library code: progress goes to an ``on_event`` callback, outcomes are return values and
exceptions (``Stopped``); the CLI prints them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import shutil
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from posenc.core.errors import ConfigError
from posenc.core.io import write_json
from posenc.engine.compose_cache import UNCOMPOSED, cache_folder
from posenc.engine.context import Event, Experiment, RunContext, error_line, main_table
from posenc.engine.results import RunDir, make_unique_dir
from posenc.launch.listing import (
    SWEEP_FILE,
    job_run,
    mark_failed,
    read_sweep,
    record_job,
    runs_table,
    write_tables,
)
from posenc.launch.overrides import expand, product, split_overrides, sweeps, written_out

SCHEMA_WARNING = r"(?s).*is validated against ConfigStore schema"
# A submitit job unpickles ``_job`` (importing this module) before Hydra loads the launcher
# config again; the filter has to be in place by then (see quiet_schema_matching).
warnings.filterwarnings("ignore", message=SCHEMA_WARNING, category=UserWarning)

__all__ = [
    "SWEEP_FILE",
    "Stopped",
    "SweepPlan",
    "check_jobs",
    "check_launcher",
    "create",
    "expand",
    "failed_job",
    "first_failure",
    "launch",
    "launchers",
    "plan",
    "protocol_of",
    "run",
    "run_job",
    "split_overrides",
    "write_tables",
]

# Launchers that come from a Hydra plugin outside hydra-core: the plugin's module, and the extra
# of posenc that installs it.
PLUGIN_LAUNCHERS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "cluster"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "cluster"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "cluster"),
}


def _plugin_installed(name: str) -> bool:
    module = PLUGIN_LAUNCHERS.get(name, (None,))[0]
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package (hydra_plugins) is missing too: the base install
        return False


def missing_extra(launcher: str) -> str | None:
    """The extra that installs ``launcher``'s plugin when it is not installed (None: it is, or it
    needs none), so that a dry run can plan jobs for a launcher this machine lacks."""
    return None if _plugin_installed(launcher) else PLUGIN_LAUNCHERS[launcher][1]


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


def protocol_of(cfg: DictConfig) -> Experiment:
    """The experiment protocol the config's ``protocol`` node names (``_target_``), built."""
    from posenc.engine.config import instantiate

    node = cfg.get("protocol")
    if not isinstance(node, DictConfig) or "_target_" not in node:
        raise ConfigError(
            f"protocol: expected a node naming a protocol class, such as "
            f"{{_target_: posenc.experiments.train.Train}}; got {node!r}"
        )
    protocol = instantiate(node, "protocol")
    if not isinstance(protocol, Experiment):
        raise ConfigError(
            f"protocol._target_: '{node._target_}' is not an experiment protocol "
            "(a class with tables, check(cfg) and run(cfg, ctx))"
        )
    return protocol


def _check_job(job: Sequence[str]) -> None:
    from posenc.engine.config import compose
    from posenc.engine.loggers import sinks_from

    cfg = compose(job)
    protocol_of(cfg).check(cfg)
    sinks_from(cfg)  # a logger whose package is missing stops the sweep before any job


def _where(job: Sequence[str], swept: Sequence[int]) -> str:
    return " ".join(job[i] for i in swept)


CHECK_CACHE_ENV = "POSENC_CHECK_CACHE"  # a folder for the jobs already checked; "off": check every job


def check_cache() -> Path | None:
    """Where checked jobs are remembered: ``$POSENC_CHECK_CACHE``, else the user's cache folder
    (``$XDG_CACHE_HOME`` or ``~/.cache``)/posenc/checked; None when it is ``off``."""
    return cache_folder(CHECK_CACHE_ENV, "checked")


@functools.cache
def code_fingerprint() -> str:
    """A hash of everything a job's check reads besides its overrides: posenc's code and config
    tree (but for the suites, ``_a_suite``), the researcher's config folders, and the versions of
    the packages that build models or that a check asks for (a logger's, a launcher's): installing
    or removing one checks again."""
    import importlib.metadata

    from posenc.engine.config import user_config_dirs

    digest = hashlib.blake2b(digest_size=16)
    checkout = Path(__file__).resolve().parents[2]  # the checkout (or site-packages)
    trees = [(checkout, checkout / sub, sub == "configs") for sub in ("posenc", "configs", "experiments", "cli")]
    trees += [(d, d, True) for d in user_config_dirs()]  # the researcher's config folders
    for root, tree, configs in trees:
        for f in sorted(tree.rglob("*")):
            if f.suffix in (".py", ".yaml") and f.is_file() and not (configs and _a_suite(f, tree)):
                digest.update(str(f.relative_to(root)).encode() + f.read_bytes())
    # what builds models, and the packages a check requires (loggers, launchers, real models)
    for package in (
        *("torch", "hydra-core", "omegaconf", "transformers", "gguf", "tokenizers"),
        *("tensorboard", "mlflow-skinny", "mlflow", "wandb", "hydra-joblib-launcher", "hydra-submitit-launcher"),
    ):
        try:
            digest.update(f"{package}={importlib.metadata.version(package)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{package}=none".encode())
    return digest.hexdigest()


def _a_suite(f: Path, config_tree: Path) -> bool:
    """A suite's file in a config tree (``suite/*.yaml``): a job's check never reads one (the
    suite planned the job), so editing a suite does not check its jobs again."""
    return f.suffix == ".yaml" and f.relative_to(config_tree).parts[0] in UNCOMPOSED


CHECK_WORKERS_MAX = 8  # processes checking a plan's jobs at once, at most the cores this process may use
JOBS_PER_WORKER = 8  # a worker only for every this many jobs to check: fewer are checked in this process
CHUNK = 2  # jobs a worker checks per task: small, so that the first failure stops the rest soon


def check_jobs(jobs: Sequence[Sequence[str]], workers: int | None = None) -> None:
    """Compose every job's config and run its protocol's ``check`` (it builds what the job will
    build), so that a mistake stops the sweep before any job starts: the first job, in order, whose
    check fails raises its ``ConfigError``, named by the values it sweeps (``first_failure``)."""
    failure = first_failure(jobs, workers)
    if failure is not None:
        raise failed_job(jobs, *failure)


def failed_job(jobs: Sequence[Sequence[str]], job: Sequence[str], error: str) -> ConfigError:
    """The error of ``job``, one of ``jobs``, named by the values its sweep varies."""
    swept = [i for i in range(len(jobs[0]) if jobs else 0) if len({j[i] for j in jobs}) > 1]
    where = _where(job, swept)
    return ConfigError(f"job {where}: {error}" if where else error)


def first_failure(jobs: Sequence[Sequence[str]], workers: int | None = None) -> tuple[Sequence[str], str] | None:
    """The first job, in order, whose check (``_check_job``) fails, with its error line; None
    when every job passes.

    Two shortcuts keep this fast without skipping a check that could fail: jobs that differ only
    in ``seed=`` are checked once (a seed is any integer; nothing a check builds depends on it),
    and a job that passed its check before, with the same code, config tree and packages
    (``code_fingerprint``), is remembered in ``check_cache()``. Only passes are remembered. A job
    checked again composes from the kept compositions (``posenc.engine.compose_cache``) unless its
    config files changed. The jobs left are checked by ``workers`` processes at once (None:
    ``check_workers``), each a fork of this one; the answer is the one a check in order gives."""
    folder = check_cache()
    fingerprint = code_fingerprint() if folder is not None else ""
    seen: set[tuple[str, ...]] = set()
    todo: list[tuple[Sequence[str], Path | None]] = []
    for job in jobs:
        key = tuple(o for o in job if o.split("=", 1)[0] != "seed")
        if key in seen:
            continue
        seen.add(key)
        mark = None
        if folder is not None:
            name = hashlib.blake2b(repr((fingerprint, key)).encode(), digest_size=16).hexdigest()
            mark = folder / fingerprint[:16] / name
            if mark.is_file():
                continue
        todo.append((job, mark))
    errors = _errors([job for job, _ in todo], check_workers(len(todo)) if workers is None else workers)
    for (job, mark), error in zip(todo, errors):
        if error is not None:
            return job, error
        if mark is not None:
            try:
                mark.parent.mkdir(parents=True, exist_ok=True)
                mark.touch()
            except OSError:  # a read-only cache only costs the next plan its speed
                pass
    return None


def check_workers(jobs: int) -> int:
    """How many processes check ``jobs`` jobs: one per ``JOBS_PER_WORKER`` jobs, at most the cores
    this process may run on and ``CHECK_WORKERS_MAX``; one (this process) off Linux, where a
    worker could not be a fork of this process."""
    if sys.platform != "linux":
        return 1
    return max(1, min(len(os.sched_getaffinity(0)), CHECK_WORKERS_MAX, jobs // JOBS_PER_WORKER))


def _errors_until_failure(jobs: Sequence[Sequence[str]]) -> list[str | None]:
    """Each job's check in order, up to and including the first failure: None for a pass, the
    error line for the failure."""
    errors: list[str | None] = []
    for job in jobs:
        try:
            _check_job(job)
        except ConfigError as e:
            return [*errors, str(e)]
        errors.append(None)
    return errors


def _errors(jobs: Sequence[Sequence[str]], workers: int) -> list[str | None]:
    """``_errors_until_failure`` of all ``jobs``, by ``workers`` forks of this process checking
    ``CHUNK`` jobs each at a time; tasks after the first failure are cancelled."""
    if workers <= 1 or len(jobs) <= CHUNK:
        return _errors_until_failure(jobs)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    errors: list[str | None] = []
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_one_thread)
    try:
        tasks = [pool.submit(_errors_until_failure, jobs[i : i + CHUNK]) for i in range(0, len(jobs), CHUNK)]
        for task in tasks:
            errors += task.result()
            if errors[-1] is not None:
                break
    finally:
        pool.shutdown(cancel_futures=True)
    return errors


def _one_thread() -> None:
    """A check worker's start: one thread for torch, since the workers share the cores."""
    import torch

    torch.set_num_threads(1)


def fit_globs(chosen: dict[str, list[str]], globbed: set[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Keep of each ``glob`` the options that fit: an option whose every job fails its check is
    left out, with the first job's error line as the reason ({override: reason}); one that fails
    in some jobs only, or a glob none of whose options fit, stays for ``check_jobs`` to report."""
    if not globbed:
        return chosen, {}
    errors: dict[tuple[str, ...], str] = {}
    for job in product(chosen):
        try:
            _check_job(job)
        except ConfigError as e:
            errors[tuple(job)] = str(e)
    kept, left_out = dict(chosen), {}
    for key in globbed:
        failing = {}
        for value in chosen[key]:
            jobs = [tuple(job) for job in product({**kept, key: [value]})]
            if all(job in errors for job in jobs):
                failing[value] = errors[jobs[0]]
        if failing and len(failing) < len(chosen[key]):
            kept[key] = [v for v in chosen[key] if v not in failing]
            left_out.update(failing)
    return kept, left_out


@dataclass
class SweepPlan:
    """A checked sweep: its launcher, its overrides (each sweep written out, ``explicit``) and
    every job's overrides in Hydra's order."""

    launcher: str
    job_overrides: list[str]
    hydra_overrides: list[str]
    jobs: list[list[str]] = field(default_factory=list)
    # options a glob matched that do not fit the job: {override: why}
    left_out: dict[str, str] = field(default_factory=dict)


def plan(overrides: Sequence[str], launcher: str = "basic", check: bool = True) -> SweepPlan:
    """Split, expand and check a sweep's overrides (``check_launcher``, ``fit_globs``,
    ``check_jobs``): every mistake is a ``ConfigError`` before anything is written."""
    job_overrides, hydra_overrides = split_overrides(list(overrides))
    check_launcher(launcher, hydra_overrides)
    chosen, globbed = sweeps(job_overrides)
    left_out: dict[str, str] = {}
    if check:
        chosen, left_out = fit_globs(chosen, globbed)
        check_jobs(product(chosen))
    return SweepPlan(launcher, written_out(chosen), hydra_overrides, product(chosen), left_out)


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


class Stopped(Exception):
    """A stop signal (SIGTERM, SIGINT) ended the launcher; its workers are stopped."""

    def __init__(self, name: str, sweep_dir: Path) -> None:
        self.name, self.sweep_dir = name, sweep_dir
        super().__init__(f"stopped by {name}: the launcher's workers are stopped; the jobs so far are in {sweep_dir}")

    @property
    def exit_code(self) -> int:
        return 128 + signal.Signals[self.name]


def _job(cfg: Any) -> dict[str, Any]:
    """What every launcher runs, here or in a submitit job (pickled by reference)."""
    return run_job(cfg)


def launch(sweep_dir: Path, launcher: str, job_overrides: Sequence[str], hydra_overrides: Sequence[str]) -> int:
    """Hand the sweep to Hydra's ``@hydra.main`` as if from its own command line; Hydra's exit
    code (0 when every job ran, failed or not). A stop signal raises ``Stopped``."""
    import hydra

    from posenc.engine.config import searchpath_overrides
    from posenc.engine.signals import sigterm_unwinds

    entry = hydra.main(config_path="pkg://posenc.configs", config_name="config", version_base="1.3")(_job)
    argv = [
        sys.argv[0],
        "--multirun",
        f"hydra/launcher={launcher}",
        f"hydra.sweep.dir={sweep_dir}",
        *searchpath_overrides(),
        *hydra_overrides,
        *job_overrides,
    ]
    saved, sys.argv = sys.argv, argv
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with quiet_schema_matching(), sigterm_unwinds():
            entry()
    except SystemExit as e:  # Hydra reports its own errors, then exits
        return int(e.code or 0)
    except KeyboardInterrupt as e:  # the launcher has stopped its workers
        raise Stopped(str(e) if str(e) in ("SIGTERM", "SIGINT") else "SIGINT", sweep_dir) from None
    finally:
        sys.argv = saved
        root.handlers[:], root.level = handlers, level  # Hydra configured logging for its jobs
    return 0


@dataclass
class SweepOutcome:
    """How a sweep ended: the launcher's exit code (0 when it saw every job to its end), and the
    runs and statistics tables (``runs.csv``, ``stats.csv``)."""

    sweep_dir: Path
    code: int
    runs: pd.DataFrame
    stats: pd.DataFrame

    @property
    def failed(self) -> int:
        """Jobs that did not complete."""
        return int((self.runs["status"] != "completed").sum())


def ended_jobs(sweep_dir: Path) -> int:
    """How many of the sweep's jobs have ended (completed or failed), as its listing reads them."""
    return int(runs_table(sweep_dir)["status"].isin(("completed", "failed")).sum())


@contextmanager
def watching(sweep_dir: Path, on_event: Callable[[Event], None], every: float = 1.0) -> Iterator[None]:
    """While the launcher runs (here, in worker processes or on SLURM), an ``advance`` event with
    the number of ended jobs each time it changes (read every ``every`` seconds from the job
    folders, which every launcher fills), and once more at the end."""
    import threading

    stop, seen = threading.Event(), [ended_jobs(sweep_dir)]

    def report() -> None:
        try:
            done = ended_jobs(sweep_dir)
        except (OSError, ValueError):  # a job is writing its files: read again next time
            return
        if done != seen[0]:
            seen[0] = done
            on_event(Event("advance", done=done))

    def poll() -> None:
        while not stop.wait(every):
            report()

    watcher = threading.Thread(target=poll, name="posenc-sweep-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        report()


def run(sweep_dir: Path, plan: SweepPlan, on_event: Callable[[Event], None] | None = None) -> SweepOutcome:
    """Launch a planned sweep into its folder and list its jobs. On SLURM, a job that SLURM ended
    without a result (killed) is marked failed and the launcher's stop is not an error. Progress
    goes to ``on_event``: a ``stage`` of the sweep's jobs, then ``advance`` as they end."""
    if on_event is None:
        code = launch(sweep_dir, plan.launcher, plan.job_overrides, plan.hydra_overrides)
    else:
        on_event(Event("stage", f"sweep {Path(sweep_dir).name}", total=len(plan.jobs)))
        with watching(sweep_dir, on_event):
            code = launch(sweep_dir, plan.launcher, plan.job_overrides, plan.hydra_overrides)
    if code and plan.launcher == "submitit_slurm":
        from posenc.launch.slurm import settle

        if settle(sweep_dir):
            code = 0
    runs, stats = write_tables(sweep_dir)
    return SweepOutcome(Path(sweep_dir), code, runs, stats)


def swept_columns(runs: pd.DataFrame, stats: pd.DataFrame) -> list[str]:
    """The override columns that tell the jobs apart (seed last), for a listing of the runs."""
    swept = [
        c for c in runs.columns if c not in ("job", "status", "error") and c in stats.columns and runs[c].nunique() > 1
    ]
    return swept + (["seed"] if "seed" in runs and runs["seed"].nunique() > 1 else [])


def _slurm_id() -> str | None:
    """The SLURM id of this job (``<array>_<task>`` in an array), None outside SLURM."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")


def run_job(cfg: DictConfig) -> dict[str, Any]:
    """The body of one sweep job, inside Hydra (``HydraConfig`` is set).

    Runs the protocol into the job's folder, or resumes the run already there (a requeued
    job). A failure is recorded once: the run context marks the run ``failed``; a failure before
    the protocol opened a run folder goes to ``error.json``. It does not stop the sweep; a stop
    signal propagates so that submitit can requeue the job.
    """
    from hydra.core.hydra_config import HydraConfig

    from posenc.engine.config import with_choices

    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    overrides = list(hc.overrides.task)
    record_job(job_dir, job=int(hc.job.num), overrides=overrides, slurm_job=_slurm_id())
    cfg = with_choices(cfg, hc.runtime.choices)
    previous = job_run(job_dir)
    if previous is not None and RunDir(previous).read_summary().get("status") == "completed":
        return {"status": "completed", "run_dir": str(previous)}
    try:
        protocol = protocol_of(cfg)
        record_job(job_dir, table=main_table(protocol).name, tables=[t.name for t in protocol.tables])
        device = str(cfg.train.get("device", "auto")) if "train" in cfg else "auto"
        # the jobs of every sweep into one results root share its cache (trained models, scored cells)
        results = Path(read_sweep(Path(hc.sweep.dir))["results_root"])
        ctx = RunContext(
            root=job_dir,
            resume=previous,
            overrides=overrides,
            device_name=device,
            cache=results / "cache",
            config=cfg,
            results=results,  # the trackers' stores too (MLflow's default) are the sweep's results root's
        )
        result = protocol.run(cfg, ctx)
        record_job(job_dir, run_dir=str(result.run.path))
        status = {"status": "completed", "run_dir": str(result.run.path)}
    except Exception as e:
        status = {"status": "failed", "error": error_line(e), "run_dir": str(job_run(job_dir) or "")}
        mark_failed(job_dir, status["error"])
    write_tables(Path(hc.sweep.dir))  # the listing is fresh whenever a job ends
    return status
