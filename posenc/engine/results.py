"""Run directories: where runs go, their config hash, and their state.

Files are written atomically (``posenc.core.io``), except the logs (``metrics.jsonl``), which grow by
one appended line a record: a crash can tear only the last line, which readers skip. A run's
``summary.json`` says ``running`` until the run ends as ``completed`` or ``failed``, so a crashed run
is a marked, readable partial.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from posenc.core.errors import UserError
from posenc.core.io import atomic_write_text, write_json

RESULTS_ENV = "POSENC_RESULTS"


def results_root(explicit: str | os.PathLike | None = None) -> Path:
    """``--results-dir`` if given, else ``$POSENC_RESULTS``, else ``./results``; checked to be a
    folder this process can write (or can create), so a bad root stops a command before any work.
    Absolute, so that every path a run records (summaries, job records, caches) holds from anywhere."""
    root = Path(explicit or os.environ.get(RESULTS_ENV) or "results")
    where = "--results-dir" if explicit else f"${RESULTS_ENV}" if os.environ.get(RESULTS_ENV) else "results root"
    existing = next(p for p in (root, *root.absolute().parents) if p.exists())
    if not existing.is_dir():
        what = "is a file" if existing == root else f"cannot be created: {existing} is a file"
        raise UserError(f"{where} {root} {what}; give a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{where} {root}: {existing} is not writable; give a folder you can write")
    return root.absolute()


def config_hash(config: dict[str, Any]) -> str:
    """A stable hash of a resolved config (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"train": {"lr": 1}}`` → ``{"train.lr": 1}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def differing_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The dotted keys whose values differ between two nested configs (or exist in one only)."""
    fa, fb = flatten(a), flatten(b)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k, KeyError) != fb.get(k, KeyError))


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line to ``path`` in one write (O(1) a record, unlike rewriting the file).

    A line torn by a crash (no newline at the end of the file) is cut off first, so the new line
    starts on a line of its own; the file is not synced, so a crash loses at most its last lines.
    """
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            tail = os.pread(fd, min(size, 1 << 20), max(size - (1 << 20), 0))  # a record is far shorter
            os.ftruncate(fd, size - len(tail) + tail.rfind(b"\n") + 1)  # rfind -1: the whole tail goes
        os.write(fd, line)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file; a torn last line (a crash mid-write) is skipped."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    records = []
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:  # only the last line can be torn; an earlier bad line is damage
                raise
    return records


def make_unique_dir(parent: Path, stem: str) -> Path:
    """A new folder ``parent/stem`` (or ``stem-1``, ``stem-2``, …) that no other process got."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for i in range(1000):
        path = parent / (stem if i == 0 else f"{stem}-{i}")
        try:
            path.mkdir()  # atomic: two processes never get the same folder
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a folder {stem} under {parent}")


class RunDir:
    """``<root>/runs/<timestamp>-<name>-<shorthash>/`` with the files of one run."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, root: Path, name: str, config: dict[str, Any]) -> RunDir:
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{name}-{config_hash(config)[:8]}"
        path = make_unique_dir(Path(root) / "runs", stem)
        run = cls(path)
        atomic_write_text(path / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        run.write_summary({"status": "running", "name": name, "config_hash": config_hash(config)})
        return run

    @classmethod
    def keyed(cls, root: Path, name: str, config: dict[str, Any], key: dict[str, Any]) -> RunDir:
        """``<root>/runs/<name>-<hash of key>/``: created, or reopened when it exists, so that a
        rerun with the same ``key`` finds the cells it finished; config.yaml records ``config``."""
        path = Path(root) / "runs" / f"{name}-{config_hash(key)[:8]}"
        if (path / "summary.json").is_file():
            run = cls(path)
            run.update_summary(status="running", error=None, resumes=run.read_summary().get("resumes", 0) + 1)
        else:
            path.mkdir(parents=True, exist_ok=True)
            run = cls(path)
            run.write_summary({"status": "running", "name": name, "config_hash": config_hash(key)})
        atomic_write_text(path / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        return run

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run directory; a path that is not one is a ``UserError``."""
        from posenc.core.errors import UserError

        path = Path(path)
        if not (path / "config.yaml").is_file() or not (path / "summary.json").is_file():
            raise UserError(f"'{path}' is not a run directory (no config.yaml and summary.json)")
        return cls(path)

    @classmethod
    def reopen(cls, path: Path, config: dict[str, Any]) -> RunDir:
        """An existing run directory, to resume; refused unless it holds the same ``config``."""
        from posenc.core.errors import UserError

        run = cls.open(path)
        saved = run.read_config()
        if config_hash(saved) != config_hash(config):
            keys = differing_keys(saved, config)
            raise UserError(f"cannot resume '{path}': it holds another config (differs in {', '.join(keys)})")
        run.update_summary(status="running", error=None, resumes=run.read_summary().get("resumes", 0) + 1)
        return run

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / "checkpoint"

    def log(self, record: dict[str, Any]) -> None:
        """Append a record to ``metrics.jsonl`` (one line)."""
        append_jsonl(self.path / "metrics.jsonl", record)

    def read_records(self) -> list[dict[str, Any]]:
        """The records of ``metrics.jsonl`` (a torn last line skipped)."""
        return read_jsonl(self.path / "metrics.jsonl")

    def rewind(self, step: int) -> None:
        """Keep only the records of steps up to ``step`` (``metrics.jsonl`` rewritten atomically, once)."""
        kept = [r for r in self.read_records() if r["step"] <= step]
        atomic_write_text(self.path / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in kept))

    def read_config(self) -> dict[str, Any]:
        return yaml.safe_load((self.path / "config.yaml").read_text())

    def read_summary(self) -> dict[str, Any]:
        return json.loads((self.path / "summary.json").read_text())

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json(self.path / "summary.json", summary)

    def update_summary(self, **fields: Any) -> dict[str, Any]:
        summary = {**self.read_summary(), **fields}
        self.write_summary(summary)
        return summary
