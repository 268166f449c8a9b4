"""The reference suite: the canonical experiments as ``posenc sweep`` runs, and their tables.

A suite is a YAML file in ``configs/suite/`` (``quick``, ``full``): seeds, a default launcher,
and named sweeps, each a list of sweep overrides (``pe=nope,rope``) to which ``seed=…`` is
added. A sweep may pick the options of a group by what their classes say instead of by name
(``select: {pe: {ndim: 1}}``: every 1D scheme, so a new one joins with no edit; a list is a
union of such filters and option names). Running it makes one folder::

    <root>/suites/<timestamp>-<suite>/
        suite.json       the suite, its seeds and launcher, each sweep's jobs, folder, model and timings
        sweeps/<…>/      one ``posenc sweep`` folder per sweep (jobs, runs.md, stats.md)
        cache/           the trained models of every sweep (``cache_dir``): a model that two sweeps
                         need trains once (``posenc.experiments.cache``)

Two sweeps may fill one table (``table: extrapolation_text``), so that an option needing its own
recipe (NoPE's deeper LM) runs as a sweep of its own and is read beside the others. A sweep names
its ``controls``: options that cannot learn its label by construction, each with the reason; the
report lists them apart from the models that fell short of their target.

``collect`` gathers every sweep's rows into one long table per sweep (one row per table row of
every job, with its seed), which ``posenc.reporting.reference_report`` turns into results/REPORT.md;
it reads the report's own ``suite/`` folder back as well (its ``suite.json`` names its tables).
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from posenc.core.errors import ConfigError, UserError
from posenc.core.io import write_json
from posenc.engine.config import list_options, option_class, option_file, options_where
from posenc.engine.context import Event
from posenc.engine.results import make_unique_dir

SUITE_FILE = "suite.json"
CACHE = "cache"  # the suite's model cache, shared by all its sweeps
# extra tables a sweep's runs write beside their main one, collected as <sweep>_<name>
SIDE_TABLES = ("similarity", "depth", "recipes")


@dataclass
class SweepSpec:
    name: str
    description: str
    overrides: list[str]
    select: dict[str, Any] = field(default_factory=dict)  # group -> filter on its classes' facts, names, or a list
    table: str = ""  # the table its rows join (default: its own name)
    controls: dict[str, str] = field(default_factory=dict)  # option -> why it cannot learn the label

    def __post_init__(self) -> None:
        self.table = self.table or self.name


@dataclass
class Suite:
    name: str
    description: str
    seeds: list[int]
    launcher: str
    launcher_overrides: list[str]
    sweeps: list[SweepSpec]


@dataclass
class PlannedSweep:
    spec: SweepSpec
    overrides: list[str]  # the selected options, the spec's, the caller's, then seed=… (sweeps written out)
    jobs: list[list[str]] = field(default_factory=list)
    model: dict[str, Any] = field(default_factory=dict)  # the first job's model and training size


def _flat(items: Sequence[Any]) -> list[str]:
    """Overrides with nested lists (YAML anchors) flattened one level."""
    out: list[str] = []
    for item in items:
        out.extend(str(i) for i in item) if isinstance(item, list) else out.append(str(item))
    return out


def load(name: str) -> Suite:
    """The suite ``configs/suite/<name>.yaml``, or a suite file of the user's (``my_suite.yaml``)."""
    if name.endswith((".yaml", ".yml")):
        path = Path(name)
        if not path.is_file():
            raise UserError(f"suite file '{name}' does not exist")
        text, name = path.read_text(), path.stem
    else:
        valid = list_options("suite")
        if name not in valid:
            raise ConfigError(f"unknown suite '{name}'; valid: {', '.join(valid)}, or a path to a .yaml file")
        text = option_file("suite", name).read_text()  # built in, or in the researcher's --config-dir
    try:
        node = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"suite '{name}' is not valid YAML: {str(e).splitlines()[0]}") from None
    try:
        sweeps = [
            SweepSpec(
                key,
                str(s.get("description", "")),
                _flat(s.get("overrides", [])),
                dict(s.get("select") or {}),
                str(s.get("table") or ""),
                {str(k): str(v) for k, v in (s.get("controls") or {}).items()},
            )
            for key, s in node["sweeps"].items()
        ]
        return Suite(
            name,
            str(node.get("description", "")),
            [int(s) for s in node["seeds"]],
            str(node.get("launcher", "basic")),
            _flat(node.get("launcher_overrides", [])),
            sweeps,
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"configs/suite/{name}.yaml: malformed ({type(e).__name__}: {e}); it needs "
            "seeds and sweeps: {name: {overrides: [...]}}"
        ) from None


def _facts(group: str) -> list[str]:
    """The facts the classes of a group declare (``ClassVar`` attributes: ``ndim``, ``encodes``, …)."""
    found = {
        name
        for option in list_options(group)
        for cls in option_class(group, option).__mro__
        for name, hint in vars(cls).get("__annotations__", {}).items()
        if "ClassVar" in str(hint)
    }
    return sorted(found)


def selected(group: str, selector: Any, where: str) -> list[str]:
    """The options of ``group`` a sweep's ``select`` picks: a mapping of facts that must all hold
    (``{ndim: 1}``), an option name, or a list of these (their union), in the group's order."""
    options = list_options(group)
    names: set[str] = set()
    for item in selector if isinstance(selector, list) else [selector]:
        if isinstance(item, str):
            if item not in options:
                raise ConfigError(f"{where}: unknown {group} '{item}'; valid: {', '.join(options)}")
            names.add(item)
        elif isinstance(item, dict) and item:
            facts = _facts(group)
            for key in item:
                if key not in facts:
                    raise ConfigError(f"{where}: {group} classes have no fact '{key}'; valid: {', '.join(facts)}")
            names |= set(options_where(group, lambda c: all(getattr(c, k, None) == v for k, v in item.items())))
        else:
            raise ConfigError(
                f"{where}: select {group} takes facts ({{ndim: 1}}), option names or a list of them, not {item!r}"
            )
    if not names:
        raise ConfigError(f"{where}: select {group} {selector} matches no option")
    return [n for n in options if n in names]


def model_size(job: Sequence[str]) -> dict[str, Any]:
    """The model and training size a job composes to (what the report says it trained)."""
    from posenc.engine.config import compose

    cfg = compose(job)
    return {
        "name": cfg.choices.model,
        **{k: cfg.model[k] for k in ("d_model", "n_layers", "n_heads") if k in cfg.model},
        "steps": cfg.train.steps,
        "seq_len": cfg.train.seq_len,
        "pe_lr_scale": cfg.train.get("pe_lr_scale", 1.0),
    }


def plan(
    suite: Suite, seeds: Sequence[int] | None = None, only: Sequence[str] | None = None, extra: Sequence[str] = ()
) -> list[PlannedSweep]:
    """Every sweep of the suite with its jobs, each composed and built (``first_failure``: all the
    suite's jobs in one pass, by as many processes as it has cores to spare), so that a mistake
    stops the suite before any job runs. ``only`` picks sweeps by name; ``extra`` overrides go to
    every sweep (after the suite's own, so they win)."""
    from posenc.launch.overrides import product, sweeps, written_out
    from posenc.launch.sweep import failed_job, first_failure

    seeds = list(suite.seeds if seeds is None else seeds)
    if not seeds:
        raise UserError("no seeds given")
    names = [s.name for s in suite.sweeps]
    for name in only or ():
        if name not in names:
            raise UserError(f"suite '{suite.name}' has no sweep '{name}'; its sweeps: {', '.join(names)}")
    planned = []
    for spec in suite.sweeps:
        if only and spec.name not in only:
            continue
        where = f"suite sweep {spec.name}"
        schemes = list_options("pe")
        for control in spec.controls:
            if not set(control.split()) & set(schemes):
                raise ConfigError(f"{where}: control '{control}' names no scheme; valid: {', '.join(schemes)}")
        picked = [f"{group}={','.join(selected(group, selector, where))}" for group, selector in spec.select.items()]
        overrides = [*picked, *spec.overrides, *extra, f"seed={','.join(map(str, seeds))}"]
        try:
            swept = sweeps(overrides)[0]  # parsed once: the jobs, and the overrides that launch them
            jobs = product(swept)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
        planned.append(PlannedSweep(spec, written_out(swept), jobs))
    failure = first_failure([job for p in planned for job in p.jobs])
    if failure is not None:
        p = next(p for p in planned if failure[0] in p.jobs)
        raise ConfigError(f"suite sweep {p.spec.name}: {failed_job(p.jobs, *failure)}")
    for p in planned:
        p.model = model_size(p.jobs[0])
    return planned


@dataclass(frozen=True)
class SweepPlan:
    """What a dry run shows of one sweep: how many jobs, the values of each key its jobs vary
    (``swept``, in job order), and the overrides every job shares (``common``, in job order).
    When the jobs are every combination of the swept values (``product``: Hydra's sweeps, the
    suites'), ``swept`` says it all; otherwise ``per_job`` holds each job's swept values."""

    sweep: str
    jobs: int
    swept: dict[str, list[str]]
    common: list[str]
    product: bool
    per_job: list[dict[str, str]]


def plan_table(planned: Sequence[PlannedSweep]) -> list[SweepPlan]:
    """One ``SweepPlan`` per planned sweep (what ``posenc suite --dry-run`` prints)."""
    out = []
    for p in planned:
        jobs = [dict(o.split("=", 1) if "=" in o else (o, "") for o in job) for job in p.jobs]
        keys = list(dict.fromkeys(k for job in jobs for k in job))
        swept = {k: list(dict.fromkeys(job.get(k, "") for job in jobs)) for k in keys}
        swept = {k: values for k, values in swept.items() if len(values) > 1 or any(k not in job for job in jobs)}
        common = [o for o in p.jobs[0] if o.split("=", 1)[0] not in swept] if p.jobs else []
        per_job = [{k: job.get(k, "") for k in swept} for job in jobs]
        combinations = math.prod(len(values) for values in swept.values())
        distinct = len({tuple(row.values()) for row in per_job})
        out.append(SweepPlan(p.spec.name, len(jobs), swept, common, combinations == distinct == len(jobs), per_job))
    return out


def machine() -> dict[str, Any]:
    import torch

    return {
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def create(root: Path, suite: Suite, planned: Sequence[PlannedSweep], launcher: str) -> Path:
    """A new suite folder under ``<root>/suites/`` with its ``suite.json``; every job of every
    planned sweep gets the override ``cache_dir=<suite folder>/cache``, so that sweeps share
    their trained models."""
    path = make_unique_dir(Path(root) / "suites", f"{time.strftime('%Y%m%d-%H%M%S')}-{suite.name}")
    _share_cache(path, planned)
    seeds = _seeds(planned)
    write_json(
        path / SUITE_FILE,
        {
            "suite": suite.name,
            "description": suite.description,
            "launcher": launcher,
            "seeds": seeds,
            "sweeps": {p.spec.name: _sweep_entry(p) for p in planned},
            # sweeps a run leaves out on purpose (--only), by the table they fill: the report says "not run"
            "left_out": {s.name: s.table for s in suite.sweeps if s.name not in {p.spec.name for p in planned}},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine(),
            "seconds": None,
        },
    )
    return path


def extend(suite_dir: Path, suite: Suite, planned: Sequence[PlannedSweep]) -> Path:
    """Add the planned sweeps to an existing suite folder (``posenc suite --only NAME --into DIR``),
    so that a suite too long for one sitting runs sweep by sweep into one folder, one model cache
    and one report. The folder must be the same suite's, with the same seeds, and must not hold a
    finished run of a planned sweep already."""
    saved = read(suite_dir)
    where = f"'{suite_dir}'"
    if saved["suite"] != suite.name:
        raise UserError(f"{where} holds the suite '{saved['suite']}', not '{suite.name}'")
    if (seeds := _seeds(planned)) != saved["seeds"]:
        raise UserError(f"{where} ran seeds {saved['seeds']}; these sweeps plan {seeds} (give --seeds to match)")
    ran = [p.spec.name for p in planned if (saved["sweeps"].get(p.spec.name) or {}).get("seconds") is not None]
    if ran:
        raise UserError(f"{where} has run the sweep {ran[0]} already; its tables are there")
    _share_cache(Path(suite_dir), planned)
    for p in planned:
        saved["sweeps"][p.spec.name] = _sweep_entry(p)
        saved["left_out"].pop(p.spec.name, None)
    write_json(Path(suite_dir) / SUITE_FILE, saved)
    return Path(suite_dir)


def _share_cache(path: Path, planned: Sequence[PlannedSweep]) -> None:
    shared = f"cache_dir={quoted(str((path / CACHE).resolve()))}"
    for p in planned:
        p.overrides.append(shared)
        for job in p.jobs:
            job.append(shared)


def _seeds(planned: Sequence[PlannedSweep]) -> list[int]:
    return sorted({int(dict(o.split("=", 1) for o in job)["seed"]) for p in planned for job in p.jobs})


def _sweep_entry(p: PlannedSweep) -> dict[str, Any]:
    return {
        "description": p.spec.description,
        "overrides": p.overrides,
        "model": p.model,
        "table": p.spec.table,
        "controls": p.spec.controls,
        "jobs": len(p.jobs),
        "dir": None,
        "seconds": None,
    }


@dataclass
class SuiteOutcome:
    """How a suite's sweeps ended: its folder, the jobs that did not complete, its seconds."""

    suite_dir: Path
    failed: int
    seconds: float


def run(
    suite_dir: Path,
    planned: Sequence[PlannedSweep],
    launcher: str,
    launcher_overrides: Sequence[str] = (),
    on_event: Callable[[Event], None] | None = None,
) -> SuiteOutcome:
    """Run each planned sweep of a created suite folder (``create``) as one ``posenc sweep`` into
    ``sweeps/``, one after the other, recording each sweep's folder, launcher exit code and seconds
    in ``suite.json``; progress goes to ``on_event``: a ``stage`` of all the suite's jobs, an
    ``advance`` as each ends, and messages. A stop signal raises ``posenc.launch.sweep.Stopped``."""
    from dataclasses import replace

    from posenc.launch import sweep

    def say(text: str) -> None:
        if on_event is not None:
            on_event(Event("message", text))

    def jobs_ended(before: int) -> Callable[[Event], None] | None:
        """A sweep's progress as the suite's: its ended jobs after the ``before`` of earlier sweeps."""
        if on_event is None:
            return None
        return lambda e: on_event(replace(e, done=before + e.done)) if e.kind == "advance" else None

    if on_event is not None:
        on_event(Event("stage", f"suite {Path(suite_dir).name}", total=sum(len(p.jobs) for p in planned)))
    started, failed, before = time.perf_counter(), 0, 0
    for p in planned:
        t0 = time.perf_counter()
        sweep_dir = sweep.create(suite_dir, [*p.overrides, *launcher_overrides], launcher, p.jobs)
        record(suite_dir, p.spec.name, dir=str(sweep_dir.relative_to(suite_dir)))
        say(f"{p.spec.name}: {len(p.jobs)} jobs: {p.spec.description}")
        plan = sweep.SweepPlan(launcher, p.overrides, list(launcher_overrides), p.jobs)
        outcome = sweep.run(sweep_dir, plan, on_event=jobs_ended(before))
        before += len(p.jobs)
        failed += outcome.failed
        record(suite_dir, p.spec.name, seconds=time.perf_counter() - t0, launcher_exit=outcome.code)
        say(f"{p.spec.name}: done in {time.perf_counter() - t0:.0f} s")
    seconds = time.perf_counter() - started
    # the suite's seconds are its sweeps' (a suite run sweep by sweep into one folder adds up)
    total = sum(s["seconds"] or 0 for s in read(suite_dir)["sweeps"].values())
    record(suite_dir, seconds=total, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return SuiteOutcome(Path(suite_dir), failed, seconds)


def quoted(value: str) -> str:
    """``value`` as a quoted Hydra override value (a path may hold characters Hydra parses)."""
    return "'" + value.replace("'", "\\'") + "'"


def read(suite_dir: Path) -> dict[str, Any]:
    import json

    path = Path(suite_dir) / SUITE_FILE
    if not path.is_file():
        raise UserError(f"'{suite_dir}' is not a suite directory or a report's suite/ folder (no {SUITE_FILE})")
    return json.loads(path.read_text())


def record(suite_dir: Path, sweep: str | None = None, **fields: Any) -> None:
    """Update ``suite.json``: the suite's fields, or one sweep's (its folder, seconds)."""
    data = read(suite_dir)
    (data["sweeps"][sweep] if sweep else data).update(fields)
    write_json(Path(suite_dir) / SUITE_FILE, data)


def collect(suite_dir: Path) -> dict[str, pd.DataFrame]:
    """Each finished sweep's long table (and its side tables such as ``resolution_similarity``),
    without the sizing overrides (``model.*``, ``train.*``, ``eval.*``, ``task.*``) that are the
    same in every row. A report's ``suite/`` folder gives back the tables it holds."""
    from posenc.launch.listing import long_table

    saved = read(suite_dir)
    if "tables" in saved:  # written by posenc.reporting.reference_report.write_report
        lost = [name for name in saved["tables"] if not (Path(suite_dir) / f"{name}.csv").is_file()]
        if lost:
            raise UserError(f"'{suite_dir}': {SUITE_FILE} names the table {lost[0]}.csv, which is not there")
        return {name: pd.read_csv(Path(suite_dir) / f"{name}.csv") for name in saved["tables"]}
    tables = {}
    for name, sweep in saved["sweeps"].items():
        if not sweep.get("dir"):
            continue
        folder = Path(suite_dir) / sweep["dir"]
        main = long_table(folder)
        # the experiment's own settings (extrapolation.factor) stay: the report reads them
        constant = [
            c
            for c in main.columns
            if c.split(".")[0] in ("model", "train", "eval", "task", "experiment")
            and c not in ("task", "status")
            and c in _override_keys(sweep["overrides"])
            and main[c].nunique(dropna=False) <= 1
        ]
        constant += [c for c in ("cache_dir",) if c in main]  # where the models were cached: not a result
        into = sweep.get("table") or name
        _join(tables, into, main.drop(columns=constant + ["job"]))
        for side in SIDE_TABLES:
            if any(folder.glob(f"*/runs/*/{side}.csv")):
                extra = long_table(folder, side)
                # jobs without it get a row with none of its columns; a row of it may hold a NaN
                # (a length a scheme cannot represent, the target step of a model that missed it)
                own = [c for c in extra.columns if c not in _override_keys(sweep["overrides"]) | {"job", "status"}]
                extra = extra.dropna(subset=own, how="all")
                _join(tables, f"{into}_{side}", extra.drop(columns=[c for c in constant if c in extra] + ["job"]))
    return tables


def merge(folders: Sequence[Path]) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """The tables and record of one suite run across several folders (sittings, machines, or a
    committed report's ``suite/`` folder beside the folder of the sweeps run since), for
    ``posenc suite --report-from A --report-from B``. Every folder holds the same suite and seeds;
    each sweep ran to its end in one folder only; a table two folders fill gets both folders' rows.
    The record's seconds add up, and a sweep one folder left out and another ran counts as run."""
    if len(folders) == 1:
        return collect(folders[0]), read(folders[0])
    metas = [read(f) for f in folders]
    first, where = metas[0], f"'{folders[0]}'"
    ran: dict[str, tuple[Path, dict[str, Any]]] = {}
    for folder, meta in zip(folders, metas):
        if meta.get("suite") != first.get("suite"):
            raise UserError(
                f"'{folder}' holds the suite '{meta.get('suite')}', {where} the suite '{first.get('suite')}'"
            )
        if meta.get("seeds") != first.get("seeds"):
            raise UserError(f"'{folder}' ran seeds {meta.get('seeds')}, {where} ran seeds {first.get('seeds')}")
        for name, sweep in meta["sweeps"].items():
            if sweep.get("seconds") is None:
                if sweep.get("dir"):  # its rows would join a table another folder may fill
                    raise UserError(f"the sweep {name} in '{folder}' did not finish: run it again or leave it out")
                continue
            if name in ran:
                raise UserError(f"the sweep {name} ran in both '{ran[name][0]}' and '{folder}'; give one of them")
            ran[name] = (folder, sweep)
    tables: dict[str, pd.DataFrame] = {}
    for folder in folders:
        for name, table in collect(folder).items():
            _join(tables, name, table)
    merged = {k: v for k, v in first.items() if k != "tables"}
    merged["sweeps"] = {name: ran[name][1] for name in sorted(ran)}
    merged["left_out"] = {k: v for m in metas for k, v in (m.get("left_out") or {}).items() if k not in ran}
    merged["seconds"] = sum(s["seconds"] for s in merged["sweeps"].values())
    merged["created"] = min(m["created"] for m in metas if m.get("created"))
    merged["finished"] = max((m["finished"] for m in metas if m.get("finished")), default=None)
    return tables, merged


def _join(tables: dict[str, pd.DataFrame], name: str, rows: pd.DataFrame) -> None:
    tables[name] = pd.concat([tables[name], rows], ignore_index=True) if name in tables else rows


def _override_keys(overrides: Sequence[str]) -> set[str]:
    return {o.lstrip("+~").split("=", 1)[0] for o in overrides}
