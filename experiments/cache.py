"""Trained models cached by the hash of their training config, shared by every run that points at
one cache folder: train once, evaluate many times.

The folder is the config's ``cache_dir``, else ``<results root>/cache``; ``posenc suite`` sets
``<suite folder>/cache`` for all its sweeps, so a model that two sweeps need (``extrapolation_text``'s
RoPE and ``extrapolation_target``'s) trains once per suite::

    <cache>/<hash>/              a completed training: config.yaml (its training config),
                                 summary.json (how it ended), metrics.jsonl, checkpoint/
    <cache>/.<hash>.<host>.<pid>[-n]/   a training in progress, never read

A training runs in its own hidden folder and is published by one rename once complete, so no
reader ever sees a half-written entry. Two jobs that want the same entry at once take turns on a
lock file (``<cache>/.<hash>.lock``, an advisory ``flock``, which the kernel drops when its holder
dies): the first trains and publishes, the second waits and loads what the first published. Jobs
that cannot share a lock (another host on a file system without ``flock``) may both train; the
first to finish publishes and the other drops its folder. An entry counts only when its summary
says completed and its weights exist. A job killed mid-training (SIGKILL, a node lost) leaves its
hidden folder; the next job that trains the same config removes those of dead processes on its own
host (a folder of another host may belong to a live job there).
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import shutil
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import yaml

from posenc.core.io import atomic_write_text
from posenc.engine.build import Setup
from posenc.engine.results import RunDir, config_hash, make_unique_dir
from posenc.engine.training import inert_settings, load_weights
from posenc.experiments.train import fit

OnLog = Callable[[dict[str, Any]], None]
# ``RunContext.stage``: starts a stage of (label, steps) and returns the training loop's logger
Stage = Callable[[str, int], OnLog]
# how a trained model's training ended: the columns every result table carries beside its scores
TRAINED_AT = ["steps", "criterion", "target", "reached_target", "target_step"]


@dataclasses.dataclass
class Trained:
    model: torch.nn.Module
    folder: Path  # its cache entry
    reused: bool  # loaded from the cache, not trained by this run
    record: dict[str, Any]  # TRAINED_AT, and train_loss


def training_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """What determines the trained weights: model, scheme, task, training, seed, and the
    validation sample that decides when the target is reached; not the scale or the evaluation."""
    choices = {g: config["choices"].get(g) for g in ("model", "pe", "task", "train")}
    return {
        **{k: config[k] for k in ("model", "pe", "task", "train", "seed")},
        "periodic_windows": config["eval"]["periodic_windows"],
        "choices": choices,
    }


def model_key(setup: Setup) -> str:
    """The hash shared by the setups that train the same weights: ``training_config``'s, without
    the train settings that cannot act on this model (``inert_settings``), so that the points of
    a recipe grid that differ only there (ALiBi at ``pe_lr_scale`` 1 and 10) train once. The
    cache entry itself stays keyed by the full training config of the setup that trained it."""
    config = training_config(setup.config)
    inert = inert_settings(setup.model)
    return config_hash({**config, "train": {k: v for k, v in config["train"].items() if k not in inert}})


def complete(entry: Path) -> bool:
    run = RunDir(entry)
    return (
        (entry / "summary.json").is_file()
        and run.read_summary().get("status") == "completed"
        and (run.checkpoint_dir / "model.safetensors").is_file()
    )


def trained(setup: Setup, cache: Path, stage: Stage | None = None) -> Trained:
    """``setup.model`` trained, or loaded from ``cache`` when a completed training of the same
    config is there (or appears while this job waits for another job training it). ``stage``
    (the run context's) is called only before training, with the label ``train <pe>`` and the
    step cap; it returns the step logger."""
    key = config_hash(training_config(setup.config))
    entry = Path(cache) / key[:16]
    if not complete(entry):
        waiting = (lambda: stage(f"wait: another job trains {setup.config['choices']['pe']}", 1)) if stage else None
        with locked(Path(cache) / f".{entry.name}.lock", on_wait=waiting):
            if not complete(entry):  # nobody published it while this job waited
                return _train(setup, Path(cache), entry, key, stage)
    summary = RunDir(entry).read_summary()
    load_weights(RunDir(entry).checkpoint_dir, setup.model)
    return Trained(setup.model, entry, True, {k: summary.get(k) for k in [*TRAINED_AT, "train_loss"]})


def _train(setup: Setup, cache: Path, entry: Path, key: str, stage: Stage | None) -> Trained:
    reap(cache, entry.name)
    partial = make_unique_dir(cache, f".{entry.name}.{HOST}.{os.getpid()}")
    run = RunDir(partial)
    atomic_write_text(partial / "config.yaml", yaml.safe_dump(training_config(setup.config), sort_keys=False))
    run.write_summary({"status": "running", "config_hash": key})
    try:
        on_log = stage(f"train {setup.config['choices']['pe']}", setup.train.steps) if stage else None
        result = fit(setup, run, on_log)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # a failed training leaves nothing to read
        raise
    record = {"steps": result.steps, **result.target_record(), "train_loss": result.train_loss}
    run.update_summary(status="completed", seconds=result.seconds, **record)
    publish(partial, entry)
    return Trained(setup.model, entry, False, record)


@contextmanager
def locked(path: Path, on_wait: Callable[[], Any] | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing, removed on release); when
    another job holds it, call ``on_wait`` once and wait. A job that waited on a file its holder
    has since removed locks the new one instead, so two jobs never hold one name's lock at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
                on_wait = None
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits while another job holds it
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)  # the holder removed this file on release: lock the current one
    try:
        yield
    finally:
        os.unlink(path)
        os.close(fd)


HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())  # no dots: the folder name splits on them
_PARTIAL = re.compile(r"\.[0-9a-f]+\.(?P<host>[A-Za-z0-9_-]+)\.(?P<pid>\d+)(-\d+)?")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        pass
    return True


def reap(cache: Path, key: str) -> list[Path]:
    """Remove the in-progress folders of ``key`` left by dead processes of this host (a job
    killed mid-training); returns them."""
    gone = []
    for folder in cache.glob(f".{key}.*"):
        m = _PARTIAL.fullmatch(folder.name)
        if m and m["host"] == HOST and int(m["pid"]) != os.getpid() and not alive(int(m["pid"])):
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(folder)
    return gone


def publish(partial: Path, entry: Path) -> None:
    """Put the completed training ``partial`` in place as ``entry`` with one rename. When another
    job published the same training first, keep theirs; an incomplete ``entry`` (a crashed
    training of an earlier version, which trained in place) is moved aside."""
    for _ in range(3):
        try:
            os.rename(partial, entry)  # fails while entry exists and is not empty
            return
        except OSError:
            if complete(entry):
                shutil.rmtree(partial, ignore_errors=True)
                return
            try:
                os.rename(entry, partial.with_name(partial.name + ".stale"))
            except OSError:
                pass  # another job moved it first
    raise RuntimeError(f"could not publish the training {partial} as {entry}")
