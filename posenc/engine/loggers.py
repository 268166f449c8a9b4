"""Metric loggers: where a run's records also go besides its ``metrics.jsonl``.

The config group ``logger`` picks them, one or several at once (``logger=tensorboard``,
``logger=[csv,tensorboard]``), as lightning-hydra-template's ``logger=`` group does. Each option
file puts one node under ``logger`` (``logger.tensorboard: {_target_: ...}``), so that options
merge; each class is a ``posenc.engine.context.MetricSink`` and names the package it needs and
the extra that installs it (``package``, ``extra``), so that a missing one is one line before
any work (``sinks_from``).

A record is what the training loop logs (``step``, ``train_loss``, ``val_bpb``, ...) with the
stage it belongs to (``stage``: ``train rope/nope/text``, ``fine-tune yarn @ 512``); a logger
keeps its numbers under ``<stage>/<key>`` at ``step``. A run's tables go to the trackers that
hold files (MLflow artifacts under ``tables/``, W&B tables), and a main table of one row (one
run's scores) also as the record of stage ``result``.
"""

from __future__ import annotations

import csv
import importlib.util
import numbers
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from posenc.core.errors import ConfigError
from posenc.engine.results import RunDir, flatten

GROUP = "logger"


def scalars(record: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """The record's numbers as ``(<stage>/<key>, value)``, without ``step`` and ``stage``."""
    stage = record.get("stage")
    for key, value in record.items():
        if key in ("step", "stage") or isinstance(value, bool) or not isinstance(value, numbers.Real):
            continue
        yield (f"{stage}/{key}" if stage else key), float(value)


def run_name(run: RunDir, name: str | None) -> str:
    """The name a tracker shows for a run: the config's ``name`` when set, else the run folder's."""
    return name or run.path.name


def tracked(run: RunDir, tracker: str) -> dict[str, Any]:
    """What a tracker recorded of a run in its summary (``trackers.<tracker>``: its run id), so that
    a resumed run (``--resume``, a requeued sweep job) logs on into the same tracker run."""
    return dict(run.read_summary().get("trackers", {}).get(tracker) or {})


def track(run: RunDir, tracker: str, **fields: Any) -> None:
    trackers = run.read_summary().get("trackers", {})
    run.update_summary(trackers={**trackers, tracker: fields})


class Logger:
    """What every logger shares: the package it needs and the step of records that have none."""

    package: ClassVar[str | None] = None  # the module the logger imports (None: the standard library)
    extra: ClassVar[str | None] = None  # posenc's extra that installs it

    def __init__(self) -> None:
        self._last = 0  # the step of the latest record that had one

    def table(self, name: str, table: Any, path: Path) -> None:
        """A table the run wrote; the run folder holds it already, so by default nothing more."""

    def _step(self, record: Mapping[str, Any]) -> int:
        """The record's ``step``; a record without one (a scorer's, a run's result) takes the last."""
        step = record.get("step")
        if isinstance(step, numbers.Integral):
            self._last = int(step)
        return self._last


class CSVLogger(Logger):
    """``metrics.csv`` in the run folder, one row a number: ``stage,step,key,value`` (a long
    table, so that new keys need no new header and the file only grows)."""

    def __init__(self, filename: str = "metrics.csv") -> None:
        super().__init__()
        self.filename = filename
        self._path: Path | None = None

    def open(self, run: RunDir, config: Mapping[str, Any]) -> None:
        self._path = run.path / self.filename
        if not self._path.exists():
            self._path.write_text("stage,step,key,value\n")

    def log(self, record: Mapping[str, Any]) -> None:
        if self._path is None:
            return
        step, stage = self._step(record), record.get("stage", "")
        with self._path.open("a", newline="") as f:
            writer = csv.writer(f)
            for key, value in scalars({k: v for k, v in record.items() if k != "stage"}):
                writer.writerow([stage, step, key, value])

    def close(self, status: str) -> None:
        self._path = None


class TensorBoardLogger(Logger):
    """TensorBoard event files in ``<run>/tensorboard`` (``tensorboard --logdir results/runs``),
    written by ``torch.utils.tensorboard.SummaryWriter``."""

    package, extra = "tensorboard", "tensorboard"

    def __init__(self, subdir: str = "tensorboard", flush_secs: int = 30) -> None:
        super().__init__()
        self.subdir, self.flush_secs = subdir, flush_secs
        self._writer: Any = None

    def open(self, run: RunDir, config: Mapping[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.close("superseded")
        self._writer = SummaryWriter(log_dir=str(run.path / self.subdir), flush_secs=self.flush_secs)

    def log(self, record: Mapping[str, Any]) -> None:
        if self._writer is None:
            return
        step = self._step(record)
        for tag, value in scalars(record):
            self._writer.add_scalar(tag, value, global_step=step)

    def close(self, status: str) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class MLflowLogger(Logger):
    """An MLflow run per posenc run, in the experiment ``experiment`` of the tracking store
    ``tracking_uri`` (default: ``<results root>/mlruns``, a file store, which needs no server and no
    database, shared by the jobs of every sweep into that root; ``sqlite:///...`` or a server's URL
    otherwise); the config flattened into params, ``tags`` as tags. Needs only ``mlflow-skinny``."""

    package, extra = "mlflow", "mlflow"
    STATUS: ClassVar[dict[str, str]] = {"completed": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment: str = "posenc",
        name: str | None = None,
        tags: Sequence[str] = (),
        results_root: str | None = None,
    ) -> None:
        super().__init__()
        self.tracking_uri, self.experiment, self.name, self.tags = tracking_uri, experiment, name, list(tags)
        self.results_root = results_root
        self._client: Any = None
        self._run_id: str | None = None

    def open(self, run: RunDir, config: Mapping[str, Any]) -> None:
        from mlflow.tracking import MlflowClient

        self.close("superseded")
        root = Path(self.results_root) if self.results_root else run.path.parents[1]  # the folder above runs/
        uri = self.tracking_uri or (root / "mlruns").resolve().as_uri()
        if uri.startswith("file:"):  # MLflow 3 refuses a file store (its default here) unless asked for
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._client = MlflowClient(tracking_uri=uri)
        before = tracked(run, "mlflow")
        if before.get("tracking_uri") == uri and self._exists(before.get("run_id")):
            self._run_id = before["run_id"]  # a resumed run (a requeued job) goes on in its MLflow run
            self._client.update_run(self._run_id, status="RUNNING")
            return
        found = self._client.get_experiment_by_name(self.experiment)
        experiment_id = found.experiment_id if found else self._client.create_experiment(self.experiment)
        tags = {"posenc.run_dir": str(run.path.resolve()), **{t: "" for t in self.tags}}
        self._run_id = self._client.create_run(experiment_id, run_name=run_name(run, self.name), tags=tags).info.run_id
        track(run, "mlflow", tracking_uri=uri, run_id=self._run_id)
        params = {k: str(v)[:500] for k, v in flatten(dict(config)).items()}  # MLflow's limit on a value
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow takes at most 100 params a batch
            self._client.log_batch(self._run_id, params=items[i : i + 100])

    def _exists(self, run_id: str | None) -> bool:
        from mlflow.exceptions import MlflowException

        try:
            return run_id is not None and self._client.get_run(run_id) is not None
        except MlflowException:  # deleted, or another store
            return False

    def log(self, record: Mapping[str, Any]) -> None:
        if self._run_id is None:
            return
        import time

        from mlflow.entities import Metric

        step, now = self._step(record), int(time.time() * 1000)
        metrics = [Metric(key, value, now, step) for key, value in scalars(record)]
        if metrics:
            self._client.log_batch(self._run_id, metrics=metrics)

    def table(self, name: str, table: Any, path: Path) -> None:
        if self._run_id is not None and path.is_file():
            self._client.log_artifact(self._run_id, str(path), artifact_path="tables")

    def close(self, status: str) -> None:
        if self._run_id is not None:
            self._client.set_terminated(self._run_id, status=self.STATUS.get(status, "FINISHED"))
            self._run_id = None


class WandbLogger(Logger):
    """A Weights & Biases run per posenc run, in ``<run>/wandb``; ``mode: offline`` (the default:
    no network; ``wandb sync`` uploads it later) or ``online``."""

    package, extra = "wandb", "wandb"

    def __init__(
        self,
        project: str = "posenc",
        mode: str = "offline",
        entity: str | None = None,
        name: str | None = None,
        tags: Sequence[str] = (),
    ) -> None:
        super().__init__()
        if mode not in ("offline", "online", "disabled"):
            raise ConfigError(f"logger.wandb.mode: '{mode}' is not one of offline, online, disabled")
        self.project, self.mode, self.entity, self.name, self.tags = project, mode, entity, name, list(tags)
        self._run: Any = None
        self._stages: set[str] = set()

    def open(self, run: RunDir, config: Mapping[str, Any]) -> None:
        import wandb

        self.close("superseded")
        run_id = tracked(run, "wandb").get("run_id") or uuid.uuid4().hex[:8]  # a resumed run goes on in it
        track(run, "wandb", run_id=run_id)
        self._run = wandb.init(
            id=run_id,
            resume="allow",
            project=self.project,
            entity=self.entity,
            name=run_name(run, self.name),
            tags=self.tags or None,
            config=dict(config),
            dir=str(run.path),
            mode=self.mode,
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off"),
        )

    def log(self, record: Mapping[str, Any]) -> None:
        """W&B's own step only grows, while each stage counts its steps from 1 (a fine-tune after a
        training): the record's step goes in as ``<stage>/step``, the x-axis of the stage's charts."""
        if self._run is None:
            return
        stage = record.get("stage")
        axis = f"{stage}/step" if stage else "step"
        if stage and stage not in self._stages:
            self._run.define_metric(f"{stage}/*", step_metric=axis)
            self._stages.add(stage)
        self._run.log({**dict(scalars(record)), axis: self._step(record)})

    def table(self, name: str, table: Any, path: Path) -> None:
        if self._run is not None:
            import wandb

            self._run.log({f"tables/{name}": wandb.Table(dataframe=table)})

    def close(self, status: str) -> None:
        if self._run is not None:
            self._run.finish(exit_code=0 if status == "completed" else 1)
            self._run = None


def sinks_from(cfg: Mapping[str, Any], results_root: Path | None = None) -> list[Logger]:
    """The loggers the config's ``logger`` node names, built (none when it has none). A logger
    whose package is missing is a ``ConfigError`` naming its extra, raised here, before any work;
    the config's ``name`` and ``tags`` go to the trackers that show them, ``results_root`` to
    those that keep a store there (MLflow's default)."""
    from posenc.engine.config import instantiate, to_container

    node = cfg.get(GROUP) if cfg is not None else None
    if not node:
        return []
    common = {"name": cfg.get("name"), "tags": list(to_container(cfg.get("tags")) or [])}
    common["results_root"] = str(results_root) if results_root is not None else None
    sinks = []
    for option, sub in to_container(node).items():
        cls = _target(sub, f"{GROUP}.{option}")
        package = getattr(cls, "package", None)  # a researcher's own sink need not say
        if package is not None and importlib.util.find_spec(package) is None:
            raise ConfigError(f"logger={option} needs the '{package}' package: pip install 'posenc[{cls.extra}]'")
        wants = {k: v for k, v in common.items() if v and k not in sub and k in _parameters(cls)}
        sinks.append(instantiate(sub, f"{GROUP}.{option}", **wants))
    return sinks


def _target(node: Any, path: str) -> Any:
    from posenc.engine.config import target_class

    if not isinstance(node, dict):
        raise ConfigError(f"{path}: expected a node with _target_, got {node!r}")
    return target_class(node, path)


def _parameters(cls: Any) -> set[str]:
    import inspect

    return set(inspect.signature(cls).parameters)
