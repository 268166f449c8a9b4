"""Atomic file writes: every file goes to a temporary name in its folder and is renamed over the
target, so a reader (or a crash) never sees half a file; a folder is replaced whole.

The one place that writes a table, a JSON file or a plot; every layer above uses these.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

_UMASK = os.umask(0)
os.umask(_UMASK)


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


def replace_folder(target: Path, fill: Callable[[Path], None]) -> None:
    """Fill a fresh ``<target>.new`` with ``fill``, then put it in place of ``target``.

    A crash at any moment leaves the whole old folder or the whole new one: the new folder only
    replaces the old after it is complete, and ``settle_folder`` finishes a swap that stopped
    between the two renames. (Files written one by one could mix two states.)
    """
    target = Path(target)
    new, old = target.with_name(target.name + ".new"), target.with_name(target.name + ".old")
    settle_folder(target)
    shutil.rmtree(new, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    new.mkdir(parents=True)
    fill(new)
    if target.exists():
        os.rename(target, old)
    os.rename(new, target)
    shutil.rmtree(old, ignore_errors=True)


def settle_folder(target: Path) -> None:
    """Finish a ``replace_folder`` that stopped after moving the old folder away."""
    target = Path(target)
    new, old = target.with_name(target.name + ".new"), target.with_name(target.name + ".old")
    if not target.exists() and old.exists() and new.exists():
        os.rename(new, target)


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_table(df: pd.DataFrame, folder: Path, stem: str = "table") -> tuple[Path, Path]:
    """``stem.csv`` and ``stem.md`` (a GitHub-style Markdown table) in ``folder``."""
    csv, md = Path(folder) / f"{stem}.csv", Path(folder) / f"{stem}.md"
    atomic_write_text(csv, df.to_csv(index=False))
    atomic_write_text(md, df.to_markdown(index=False, floatfmt=".4g") + "\n")
    return csv, md
