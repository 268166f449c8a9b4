"""Run directories and atomic writes.

Every file is written to a temporary name in the same folder and renamed over the target, so a
reader (or a crash) never sees half a file. A run's ``summary.json`` says ``running`` until the
run ends as ``completed`` or ``failed``, so a crashed run is a marked, readable partial.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

RESULTS_ENV = "POSENC_RESULTS"
_UMASK = os.umask(0)
os.umask(_UMASK)


def results_root(explicit: str | os.PathLike | None = None) -> Path:
    """``--results-dir`` if given, else ``$POSENC_RESULTS``, else ``./results``."""
    return Path(explicit or os.environ.get(RESULTS_ENV) or "results")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def config_hash(config: dict[str, Any]) -> str:
    """A stable hash of a resolved config (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def write_table(df: pd.DataFrame, folder: Path, stem: str = "table") -> tuple[Path, Path]:
    """``stem.csv`` and ``stem.md`` (a GitHub-style Markdown table) in ``folder``."""
    csv, md = Path(folder) / f"{stem}.csv", Path(folder) / f"{stem}.md"
    atomic_write_text(csv, df.to_csv(index=False))
    atomic_write_text(md, df.to_markdown(index=False, floatfmt=".4g") + "\n")
    return csv, md


class RunDir:
    """``<root>/runs/<timestamp>-<name>-<shorthash>/`` with the files of one run."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.records: list[dict[str, Any]] = []

    @classmethod
    def create(cls, root: Path, name: str, config: dict[str, Any]) -> RunDir:
        runs = Path(root) / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{name}-{config_hash(config)[:8]}"
        for i in range(1000):
            path = runs / (stem if i == 0 else f"{stem}-{i}")
            try:
                path.mkdir()  # atomic: two processes never get the same folder
                break
            except FileExistsError:
                continue
        else:
            raise RuntimeError(f"could not create a run directory under {runs}")
        run = cls(path)
        atomic_write_text(path / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        run.write_summary({"status": "running", "name": name, "config_hash": config_hash(config)})
        return run

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / "checkpoint"

    def log(self, record: dict[str, Any]) -> None:
        """Append a record to ``metrics.jsonl`` (the file is rewritten atomically)."""
        self.records.append(record)
        atomic_write_text(self.path / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in self.records))

    def read_summary(self) -> dict[str, Any]:
        return json.loads((self.path / "summary.json").read_text())

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json(self.path / "summary.json", summary)

    def update_summary(self, **fields: Any) -> dict[str, Any]:
        summary = {**self.read_summary(), **fields}
        self.write_summary(summary)
        return summary
