"""A cell of the protocol and its trained model, cached by the hash of the training config.

Cells that train the same model (same config but for the scale) share one training under
``<root>/cache/<hash>/``: train once, evaluate many times. A cached training counts only when
its summary says completed and its weights exist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import yaml

from posenc.core.io import atomic_write_text
from posenc.engine.build import Setup
from posenc.engine.results import RunDir
from posenc.engine.training import load_weights
from posenc.experiments.train import fit

# called before each training or fine-tune with (label, steps); returns the step logger or None
Stage = Callable[[str, int], Callable[[dict[str, Any]], None] | None]


@dataclasses.dataclass
class Cell:
    pe: str
    scale_name: str
    setup: Setup
    scale: Any
    key: str  # hash of the training config


def training_config(config: dict[str, Any]) -> dict[str, Any]:
    """What determines the trained weights: everything but the scale and the evaluation."""
    choices = {g: config["choices"].get(g) for g in ("model", "pe", "task", "train")}
    return {**{k: config[k] for k in ("model", "pe", "task", "train", "seed")}, "choices": choices}


def train_or_load(cell: Cell, root: Path, stage: Stage | None) -> tuple[torch.nn.Module, Path, bool]:
    """The trained model of a cell, from the cache when a completed training is there."""
    folder = root / "cache" / cell.key[:16]
    run = RunDir(folder)
    weights = run.checkpoint_dir / "model.safetensors"
    if (folder / "summary.json").exists() and run.read_summary().get("status") == "completed" and weights.exists():
        load_weights(run.checkpoint_dir, cell.setup.model)
        return cell.setup.model, folder, True
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "config.yaml", yaml.safe_dump(training_config(cell.setup.config), sort_keys=False))
    run.write_summary({"status": "running", "config_hash": cell.key})
    on_log = stage(f"train {cell.pe}", cell.setup.train.steps) if stage else None
    result = fit(cell.setup, run, on_log)
    run.update_summary(status="completed", steps=result.steps, train_loss=result.train_loss,
                       seconds=result.seconds)
    return cell.setup.model, folder, False
