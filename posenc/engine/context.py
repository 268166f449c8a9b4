"""The run context: everything a protocol gets besides its config, and the protocol contract.

Every experiment protocol (train, extrapolation, resolution, order, check, real-model
extrapolation) is a class with one signature::

    class Train:
        tables = (TableSpec("table", keys=("model", "pe", "task", "seed")),)

        def check(self, cfg: DictConfig) -> None: ...        # every user mistake, before any work
        def run(self, cfg: DictConfig, ctx: RunContext) -> Result: ...

and the config names it by ``protocol: {_target_: posenc.experiments.train.Train}``, so that
``posenc.launch`` finds a protocol and its checks through the config alone. The context owns
what every protocol shares (torchtune's recipes and Lightning's trainer share one such object):

- the results root and, when a run is resumed, the run folder to resume (``open``);
- the cache that runs share (trained models, a real model's scored cells): ``cache_dir``;
- provenance (commit, versions, command line, overrides, hardware) written into each run;
- progress as one event type (``Event``) sent to one callback (the CLI's bar, or nothing);
- failure marking: ``running`` marks a run ``completed``, ``failed`` or ``interrupted`` the same
  way for every protocol;
- the device, resolved once;
- metric sinks (``MetricSink``): every record a run logs also goes to each of them.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import pandas as pd
import torch
from omegaconf import DictConfig

from posenc.core.errors import Interrupted
from posenc.core.io import write_json, write_table
from posenc.engine.results import RunDir

PROVENANCE_FILE = "provenance.json"


@dataclass(frozen=True)
class TableSpec:
    """A table a protocol writes: ``<name>.csv`` and ``<name>.md`` in its run folder.

    ``keys`` are the columns that tell one row from another inside a run; ``pairs`` are the
    columns along which rows of two runs (or two cells) pair up for a paired comparison (the
    seed, the evaluation window); ``main`` marks the table a sweep lists one row of per job.
    The report and the suite YAML refer to tables by these names.
    """

    name: str
    keys: tuple[str, ...] = ()
    pairs: tuple[str, ...] = ()
    main: bool = False
    description: str = ""


@dataclass
class Result:
    """What a protocol returns: its run folder and its tables by name (``main`` first)."""

    run: RunDir
    tables: dict[str, pd.DataFrame]

    @property
    def table(self) -> pd.DataFrame:
        """The main table (the first one written)."""
        return next(iter(self.tables.values()))


@runtime_checkable
class Experiment(Protocol):
    """An experiment protocol: its declared tables, its pre-flight check, its run."""

    tables: ClassVar[tuple[TableSpec, ...]]

    def check(self, cfg: DictConfig) -> None:
        """Raise ``ConfigError`` for every mistake the config holds, before any work."""
        ...

    def run(self, cfg: DictConfig, ctx: RunContext) -> Result:
        """Run the experiment into a run folder opened through ``ctx``; return its tables."""
        ...


def main_table(protocol: Experiment) -> TableSpec:
    """The protocol's main table (the one marked ``main``, else the first declared)."""
    return next((t for t in protocol.tables if t.main), protocol.tables[0])


@dataclass(frozen=True)
class Event:
    """One progress event, the only shape progress takes.

    ``stage``: a stage starts (a training, a fine-tune, a set of forward passes), with ``total``
    units (steps, tokens); ``advance``: ``done`` units of the current stage are finished, with
    the latest ``fields`` (loss, tokens/s, a cell label); ``message``: a line for the user.
    """

    kind: Literal["stage", "advance", "message"]
    label: str = ""
    total: int | None = None
    done: int | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)


class MetricSink(Protocol):
    """Somewhere a run's records also go (CSV, TensorBoard, MLflow, Weights & Biases)."""

    def open(self, run: RunDir, config: Mapping[str, Any]) -> None: ...

    def log(self, record: Mapping[str, Any]) -> None: ...

    def table(self, name: str, table: pd.DataFrame, path: Path) -> None:
        """A table the run wrote (``path``: its CSV in the run folder)."""
        ...

    def close(self, status: str) -> None: ...


def error_line(e: BaseException) -> str:
    """``Type: first line of the message`` (the type alone when there is none)."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _git(*args: str) -> str | None:
    """The output of a git command in posenc's own checkout (None: no git, or not a checkout)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def provenance(overrides: Sequence[str] = (), name: str | None = None, tags: Sequence[str] = ()) -> dict[str, Any]:
    """Where a run came from: the commit (and whether the tree had changes not committed), the
    versions, the command line, the overrides, the machine, and the run's ``name`` and ``tags``."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "name": name,
        "tags": list(tags),
        "commit": commit.strip() or None if commit else None,
        "dirty": bool(status.strip()) if status is not None else None,
        "versions": {
            "python": platform.python_version(),
            **{n: installed(n) for n in ("posenc", "torch", "hydra-core", "transformers")},
        },
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "overrides": list(overrides),
        "hardware": {
            "machine": platform.machine(),
            "system": platform.system(),
            "processor": platform.processor() or None,
            "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "cuda_version": torch.version.cuda,
        },
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


@dataclass
class RunContext:
    """What a protocol needs besides its config (see the module docstring).

    ``resume``: the run folder to continue (a requeued sweep job, ``posenc train --resume``);
    ``cache``: the folder runs share (a sweep job's is its sweep's results root's, not its own
    folder's); ``on_event``: where progress goes; ``sinks``: where records also go; ``config``:
    the composed config, whose ``logger`` node adds its loggers to the sinks (a missing package is
    a ``ConfigError`` here, before any work) and whose ``name`` and ``tags`` go to the provenance;
    ``results``: the results root the loggers keep their stores in (a sweep job's is its sweep's,
    default ``root``).
    """

    root: Path
    resume: Path | None = None
    on_event: Callable[[Event], None] | None = None
    sinks: Sequence[MetricSink] = ()
    overrides: Sequence[str] = ()
    device_name: str = "auto"
    cache: Path | None = None
    config: Mapping[str, Any] | None = None
    results: Path | None = None
    _runs: list[RunDir] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        from posenc.engine.loggers import sinks_from

        loggers = sinks_from(self.config, self.results or self.root) if self.config is not None else []
        self.sinks = [*self.sinks, *loggers]
        self.name = self.config.get("name") if self.config is not None else None
        tags = self.config.get("tags") if self.config is not None else None
        self.tags = [str(t) for t in tags] if tags else []

    @property
    def device(self) -> torch.device:
        """The device runs use: ``device_name`` (auto: cuda, then mps, then cpu), resolved once."""
        if not hasattr(self, "_device"):
            from posenc.engine.training import resolve_device

            self._device = resolve_device(self.device_name)
        return self._device

    def cache_dir(self, config: Mapping[str, Any]) -> Path:
        """Where trained models and scored cells are shared: the config's ``cache_dir`` (a suite sets
        one for all its sweeps), else the context's ``cache``, else ``<root>/cache``."""
        given = config.get("cache_dir")
        return Path(given) if given else Path(self.cache) if self.cache is not None else Path(self.root) / "cache"

    def emit(self, kind: Literal["stage", "advance", "message"], label: str = "", **fields: Any) -> None:
        """Send one event (``total=``/``done=`` go to their fields, the rest to ``fields``)."""
        if self.on_event is not None:
            total, done = fields.pop("total", None), fields.pop("done", None)
            self.on_event(Event(kind, label, total, done, fields))

    def stage(self, label: str, total: int) -> Callable[[dict[str, Any]], None]:
        """Start a stage of ``total`` steps; the returned callback takes the training loop's records
        (each also goes to every sink, with the stage's label as ``stage``)."""
        self.emit("stage", label, total=total)

        def on_log(record: dict[str, Any]) -> None:
            self.record(label, record)
            keep = {k: record[k] for k in ("train_loss", "tokens_per_s", "reached_target") if k in record}
            self.emit("advance", label, done=record.get("step"), **keep)

        return on_log

    def record(self, stage: str, record: Mapping[str, Any]) -> None:
        """A record for the sinks alone, under ``stage`` (a training's, or a scorer's cell, whose own
        store keeps it)."""
        for sink in self.sinks:
            sink.log({"stage": stage, **record})

    def log(self, run: RunDir, record: dict[str, Any]) -> None:
        """A record into the run's ``metrics.jsonl`` and every sink."""
        run.log(record)
        for sink in self.sinks:
            sink.log(record)

    def open(self, name: str, config: dict[str, Any], *, key: dict[str, Any] | None = None) -> RunDir:
        """The run folder for ``config``: a new one, or ``resume`` reopened (same config only).

        With ``key`` (the settings that fix a run's cells), the folder is named by the key's hash
        and reopened when it exists, so a rerun skips the cells it finished (``RunDir.keyed``).
        A config ``name`` leads the folder's name; the provenance goes to ``provenance.json`` and
        into the summary.
        """
        if self.name:
            name = re.sub(r"[^\w.-]+", "_", str(self.name)) + f"-{name}"
        if self.resume is not None:
            run = RunDir.reopen(self.resume, config)
        elif key is not None:
            run = RunDir.keyed(self.root, name, config, key)
        else:
            run = RunDir.create(self.root, name, config)
        origin = provenance(self.overrides, self.name, self.tags)
        write_json(run.path / PROVENANCE_FILE, origin)
        run.update_summary(provenance=origin)
        for sink in self.sinks:
            sink.open(run, config)
        self._runs.append(run)
        return run

    @contextmanager
    def running(self, name: str, config: dict[str, Any], *, key: dict[str, Any] | None = None) -> Iterator[RunDir]:
        """Open the run folder and mark how the run ends, the same way for every protocol:
        ``completed``; ``interrupted`` (a stop signal: the run resumes from its checkpoint);
        or ``failed`` with its error line. The exception propagates."""
        run = self.open(name, config, key=key)
        try:
            yield run
        except (Interrupted, KeyboardInterrupt, SystemExit) as e:  # SystemExit: submitit requeues
            self._close(run, "interrupted", error=str(e) or type(e).__name__)
            raise
        except BaseException as e:
            self._close(run, "failed", error=error_line(e))
            raise
        self._close(run, "completed", run_dir=str(run.path.resolve()))

    def _close(self, run: RunDir, status: str, **fields: Any) -> None:
        run.update_summary(status=status, **fields)
        for sink in self.sinks:
            sink.close(status)

    def write(self, run: RunDir, specs: Sequence[TableSpec], tables: Mapping[str, pd.DataFrame]) -> Result:
        """Write each table under its declared name (an undeclared one is a bug: ``KeyError``)
        and record the main table's name in the summary."""
        declared = {s.name: s for s in specs}
        for name, table in tables.items():
            if name not in declared:
                raise KeyError(f"table '{name}' is not declared; declared: {', '.join(declared)}")
            write_table(table, run.path, name)
        main = next((s.name for s in specs if s.main), specs[0].name)
        run.update_summary(table=main, tables=list(tables))
        for sink in self.sinks:
            for name, table in tables.items():
                sink.table(name, table, run.path / f"{name}.csv")
            if main in tables and len(tables[main]) == 1:  # one run's scores: final numbers in a tracker's run list
                sink.log({"stage": "result", **tables[main].iloc[0].to_dict()})
        ordered = {main: tables[main], **tables} if main in tables else dict(tables)
        return Result(run, ordered)
