"""Find runs again: every run folder and sweep under a results root, as one table to filter and sort.

A run folder is any folder with ``config.yaml`` and ``summary.json`` (``posenc.engine.results.RunDir``)
outside the model cache; a sweep folder is one with ``sweep.json``. A run's row says where it is,
what it ran (the options picked in each config group, its seed), how it ended, and where it came
from (its provenance: name, tags, commit, start). ``--where`` and ``--sort`` also take any dotted
key of a run's config (``train.lr``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from posenc.core.errors import UserError
from posenc.engine.results import flatten
from posenc.launch.listing import JOB_FILE, SWEEP_FILE

CHOICES = ("model", "pe", "task", "scale", "experiment")
RUN_COLUMNS = (
    "run", "sweep", "job", "name", "status", *CHOICES, "seed", "tags", "started", "commit", "dirty", "error",
)  # fmt: skip
SKIPPED = {"checkpoint", "tensorboard", "wandb", "mlruns", ".hydra"}  # never hold a run folder
SWEEP_COLUMNS = ("sweep", "created", "launcher", "jobs", "completed", "failed", "other", "overrides")


def _read(path: Path, reader: Any) -> Any:
    try:
        return reader(path.read_text()) if path.is_file() else None
    except (OSError, ValueError, yaml.YAMLError):  # a folder being written, or damaged: listed without it
        return None


def run_folders(root: Path) -> Iterator[Path]:
    """Every run folder under ``root``, in path order; trained models in ``<root>/cache`` are not
    runs, and what a run holds (checkpoints, trackers' files) is not walked into."""
    root = Path(root)
    for here, dirs, files in os.walk(root):
        folder = Path(here)
        if "summary.json" in files and "config.yaml" in files:
            yield folder
            dirs[:] = []  # a run holds no run
        dirs[:] = sorted(d for d in dirs if not (folder == root and d == "cache") and d not in SKIPPED)


def _picked(config: Mapping[str, Any]) -> dict[str, str]:
    """The option of each group a run picked, and its seed; for a run of several configs (one per
    scheme or cell), each one's distinct values joined with commas in their order."""
    nodes = [config] if "choices" in config else []
    for value in config.values():  # extrapolation's cells, resolution's runs, order's cells by label
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        nodes += [v for v in items if isinstance(v, dict) and "choices" in v]
    picked: dict[str, list[str]] = {k: [] for k in (*CHOICES, "seed")}
    for node in nodes:
        for key in picked:
            value = node.get("seed") if key == "seed" else (node.get("choices") or {}).get(key)
            if value is not None and str(value) not in picked[key]:
                picked[key].append(str(value))
    return {k: ",".join(v) for k, v in picked.items()}


def _sweep_of(root: Path, folder: Path) -> tuple[str, Any]:
    """The sweep folder (relative to ``root``) and job number a run belongs to ("" when none)."""
    for parent in folder.parents:
        if parent == root or root not in parent.parents:
            break
        if (parent / SWEEP_FILE).is_file():
            job = _read(folder.parent.parent / JOB_FILE, json.loads) or {}
            return str(parent.relative_to(root)), job.get("job", "")
    return "", ""


def run_row(root: Path, folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run's row, and its config flattened (for ``--where`` and ``--sort`` on config keys)."""
    summary = _read(folder / "summary.json", json.loads) or {}
    config = _read(folder / "config.yaml", yaml.safe_load) or {}
    origin = summary.get("provenance") or _read(folder / "provenance.json", json.loads) or {}
    sweep, job = _sweep_of(root, folder)
    row = {
        "run": str(folder.relative_to(root)),
        "sweep": sweep,
        "job": job,
        "name": origin.get("name") or config.get("name") or "",
        "status": summary.get("status", ""),
        **_picked(config),
        "tags": ",".join(map(str, origin.get("tags") or config.get("tags") or [])),
        "started": origin.get("started", ""),
        "commit": (origin.get("commit") or "")[:10],
        "dirty": origin.get("dirty", ""),
        "error": summary.get("error") or "",
    }
    return row, flatten(config)


def sweep_rows(root: Path, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per sweep folder: when it was made, its launcher, its jobs and how their runs ended."""
    rows = []
    for record in sorted(Path(root).rglob(SWEEP_FILE)):
        sweep = _read(record, json.loads) or {}
        name = str(record.parent.relative_to(root))
        status = runs[runs.sweep == name].status.value_counts() if len(runs) else pd.Series(dtype=int)
        completed, failed = int(status.get("completed", 0)), int(status.get("failed", 0))
        rows.append(
            {
                "sweep": name,
                "created": sweep.get("created", ""),
                "launcher": sweep.get("launcher", ""),
                "jobs": len(sweep.get("jobs", [])),
                "completed": completed,
                "failed": failed,
                "other": int(status.sum()) - completed - failed,
                "overrides": " ".join(sweep.get("overrides", [])),
            }
        )
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))


def parse_where(filters: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``pe=rope,alibi`` → ``("pe", ["rope", "alibi"])`` (a value matches any of the listed ones)."""
    out = []
    for f in filters:
        key, sep, value = f.partition("=")
        if not sep or not key:
            raise UserError(f"--where takes KEY=VALUE (e.g. pe=rope), got '{f}'")
        out.append((key.strip(), value.split(",")))
    return out


def listing(root: Path, where: Sequence[str] = (), sort: str | None = None, sweeps: bool = False) -> pd.DataFrame:
    """The runs (or, with ``sweeps``, the sweeps) under ``root`` that match every ``where`` filter,
    sorted by ``sort`` (``-key``: descending; default: when they started). A key that is neither a
    column nor a key of any run's config is a ``UserError`` listing the keys seen."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"results root {root} is not a folder")
    pairs = [run_row(root, f) for f in run_folders(root)]
    runs = pd.DataFrame([r for r, _ in pairs], columns=list(RUN_COLUMNS))
    table = sweep_rows(root, runs) if sweeps else runs
    filters = parse_where(where)
    sort_key = sort.removeprefix("-") if sort else None
    config_keys = set().union(*(c.keys() for _, c in pairs)) if pairs and not sweeps else set()
    for key in [k for k, _ in filters] + ([sort_key] if sort_key else []):
        if key in table.columns:
            continue
        if key not in config_keys:
            seen = ", ".join(table.columns) + ("" if sweeps else ", or a key of a run's config such as train.lr")
            raise UserError(f"unknown key '{key}'; keys seen: {seen}")
        table[key] = [c.get(key, "") for _, c in pairs]
    for key, values in filters:
        table = table[table[key].map(lambda v: _text(v) in values)]
    by = sort_key or ("created" if sweeps else "started")
    return table.sort_values(by, ascending=not (sort or "").startswith("-"), kind="stable", key=_sortable).reset_index(
        drop=True
    )


def _text(value: Any) -> str:
    """How a cell reads in a filter: ``true``/``false`` for booleans (as on the command line)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _sortable(column: pd.Series) -> pd.Series:
    """Numbers by value when the whole column is numeric, else as text."""
    numeric = pd.to_numeric(column, errors="coerce")
    return numeric if numeric.notna().all() else column.map(_text)
