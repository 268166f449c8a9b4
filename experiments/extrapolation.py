"""Protocol ``extrapolation``: train at length L, evaluate at L..16L under each rescaling.

One cell is a (position scheme, scale) pair, a composed config each. Cells that train the same
model (same config but for the scale) share one training, cached under
``<root>/cache/<hash>/`` by the hash of the training config: train once, evaluate many times.
At each evaluated length a copy of the trained model is rescaled (``posenc.pe.scaling``) and
scored by ``posenc.engine.evaluation.evaluate``; with ``finetune_steps`` a second copy is first
fine-tuned at that length with the scaling applied (the PI / YaRN protocol).

Text is scored in bits per byte and perplexity over non-overlapping validation windows, a
generated task by answer accuracy; the per-position loss is averaged over position buckets.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import yaml
from omegaconf import DictConfig, OmegaConf, open_dict

from posenc.experiments.train import fit
from posenc.engine.build import Setup, build
from posenc.engine.config import compose, config_root, experiment_settings, instantiate, list_options, target_class
from posenc.core.errors import ConfigError
from posenc.engine.evaluation import IGNORE_INDEX, evaluate
from posenc.pe.base import PositionOutOfRange
from posenc.core.io import atomic_write_text, save_figure, write_table
from posenc.engine.results import RunDir, config_hash
from posenc.engine.training import load_weights, resolve_device, train

MULTIPLES = (1, 2, 4, 8, 16)
# called before each training or fine-tune with (label, steps); returns the step logger or None
Stage = Callable[[str, int], Callable[[dict[str, Any]], None] | None]


# --- planning: which (scheme, scale) cells a request means ------------------------------------

def scale_options() -> dict[str, dict[str, Any]]:
    """Every option of ``configs/scale/`` as its raw YAML node, ``none`` first."""
    folder = config_root() / "scale"
    names = sorted(list_options("scale"), key=lambda n: (n != "none", n))
    return {name: yaml.safe_load((folder / f"{name}.yaml").read_text()) or {} for name in names}


def _scale_class(node: dict[str, Any]):
    return target_class(node, "scale")


def plan(pes: Sequence[str], scales: Sequence[str], overrides: Sequence[str] = ()) -> list[DictConfig]:
    """One composed config per (pe, scale) pair where the scale applies to the scheme.

    ``scales`` may be ``["all"]``: every scale that applies to each scheme (LongRoPE only when
    its factor lists are given). A ``scale.KEY=…`` override goes to the scales that have KEY.
    Every requested scale must apply to some requested scheme, and every scheme must get a scale.
    """
    options = scale_options()
    for o in overrides:
        if o.split("=", 1)[0].lstrip("+~") in ("pe", "scale"):
            raise ConfigError(f"override '{o}': give schemes with --pe and scales with --scale")
    if not pes:
        raise ConfigError("no position scheme given; valid: " + ", ".join(list_options("pe")))
    if not scales:
        raise ConfigError("no scale given; valid: all, " + ", ".join(options))
    for name in scales:
        if name != "all" and name not in options:
            raise ConfigError(f"unknown scale '{name}'; valid: all, {', '.join(options)}")
    scale_keys = [o.split("=", 1)[0].removeprefix("scale.") for o in overrides if o.startswith("scale.")]
    requested = list(options) if "all" in scales else list(dict.fromkeys(scales))
    for key in scale_keys:
        if not any(key in options[s] for s in requested):
            raise ConfigError(f"unknown override key 'scale.{key}'; no requested scale has it "
                              f"({', '.join(requested)})")

    applicable: dict[str, list[str]] = {}
    for pe in dict.fromkeys(pes):
        scheme = instantiate(compose([*overrides_for(overrides, "none", options), f"pe={pe}"]).pe, "pe")
        applicable[pe] = [s for s in options if _scale_class(options[s]).applies(scheme)]
    given = set(scale_keys)
    cells = []
    for pe, fits in applicable.items():
        if "all" in scales:
            chosen = [s for s in fits if all(k in given for k in getattr(_scale_class(options[s]), "requires", ()))]
        else:
            chosen = [s for s in requested if s in fits]
            if not chosen:
                raise ConfigError(f"no requested scale applies to pe '{pe}' ({', '.join(requested)}); "
                                  f"scales for {pe}: {', '.join(fits)}")
        cells += [compose([*overrides_for(overrides, s, options), f"pe={pe}", f"scale={s}"]) for s in chosen]
    if "all" not in scales:
        for s in requested:
            if not any(s in fits for fits in applicable.values()):
                acts_on = _scale_class(options[s]).acts_on
                which = "; ".join(f"{pe}: {', '.join(fits)}" for pe, fits in applicable.items())
                raise ConfigError(f"scale '{s}' does not apply to pe {', '.join(applicable)}: it rescales "
                                  f"{acts_on}; scales that apply: {which}")
    return cells


def overrides_for(overrides: Sequence[str], scale: str, options: dict[str, dict[str, Any]]) -> list[str]:
    """The overrides without the ``scale.KEY=…`` ones that ``scale`` has no KEY for."""
    return [o for o in overrides
            if not o.startswith("scale.") or o.split("=", 1)[0].removeprefix("scale.") in options[scale]]


def with_scale(cfg: DictConfig, name: str, node: dict[str, Any]) -> DictConfig:
    """A copy of ``cfg`` with the scale option ``name`` (its YAML ``node``) in place of its own."""
    out = copy.deepcopy(cfg)
    with open_dict(out):
        out.scale = OmegaConf.create(node)
        out.choices.scale = name
    return out


def cells_of(cfg: DictConfig, scales: Sequence[str], factor: float | None = None) -> list[DictConfig]:
    """One config per scale of ``scales`` (``all``: every option) that applies to ``cfg``'s scheme;
    ``factor`` fixes ``scale.factor`` of those that have one (target length factor × L; null
    scales to each evaluated length).

    What ``plan`` does for the command line, for a config that is already composed (a sweep job).
    """
    options = scale_options()
    for name in scales:
        if name != "all" and name not in options:
            raise ConfigError(f"unknown scale '{name}' in extrapolation.scales; valid: all, {', '.join(options)}")
    requested = list(options) if "all" in scales else list(dict.fromkeys(scales))
    scheme = instantiate(cfg.pe, "pe")
    # under ``all``, LongRoPE only when its factor lists are given (as in ``plan``)
    fits = [s for s in requested if _scale_class(options[s]).applies(scheme)
            and not ("all" in scales and getattr(_scale_class(options[s]), "requires", ()))]
    if not fits:
        raise ConfigError(f"no scale of extrapolation.scales ({', '.join(requested)}) applies to pe '{cfg.choices.pe}'")
    if factor is not None:
        options = {s: {**node, "factor": factor} if "factor" in node else node for s, node in options.items()}
    return [with_scale(cfg, s, options[s]) for s in fits]


# --- checks, before anything is written ---------------------------------------------------------

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


def prepare(cfgs: Sequence[DictConfig], lengths: Sequence[int] | None, finetune_steps: int) -> tuple[list[Cell], list[int]]:
    """Build every cell and check every length; raise ``ConfigError`` on the first mistake."""
    if finetune_steps < 0:
        raise ConfigError(f"finetune steps must be >= 0, got {finetune_steps}")
    cells = []
    for cfg in cfgs:
        setup = build(cfg)
        scale = instantiate(cfg.scale, "scale")
        choices, pe = setup.config["choices"], setup.model.pe
        if not scale.applies(pe):
            fits = [s for s, node in scale_options().items() if _scale_class(node).applies(pe)]
            raise ConfigError(f"scale '{choices['scale']}' does not apply to pe '{choices['pe']}': it rescales "
                              f"{scale.acts_on}; scales for {choices['pe']}: {', '.join(fits)}")
        try:
            scale.check(pe)
        except ConfigError as e:
            raise ConfigError(f"scale '{choices['scale']}' with pe '{choices['pe']}': {e}") from None
        cells.append(Cell(choices["pe"], choices["scale"], setup, scale, config_hash(training_config(setup.config))))
    train_lens = {c.setup.train.seq_len for c in cells}
    if len(train_lens) != 1:
        raise ConfigError(f"every cell must train at one length, got {sorted(train_lens)}")
    train_len = train_lens.pop()
    lengths = sorted(set(lengths)) if lengths else [train_len * m for m in MULTIPLES]
    for length in lengths:
        if length < 1:
            raise ConfigError(f"evaluation length must be >= 1, got {length}")
        cells[0].setup.task.check_length(length, "val")
    return cells, lengths


# --- scoring -------------------------------------------------------------------------------------

def _score(model: torch.nn.Module, task: Any, length: int, setup: Setup, device: torch.device) -> dict[str, Any]:
    """Scores at one length; a task with depths (passkey) is scored per depth, then pooled.

    ``eval.max_windows`` caps the windows at the training length; at L there are
    max_windows · train_len / L of them, so every length reads the same bytes of a corpus.
    """
    train_len, cap = setup.train.seq_len, setup.eval.max_windows
    x, y = task.eval_windows(length, None if cap is None else max(1, cap * train_len // length))
    batch = max(1, setup.eval.batch_size * train_len // length)  # same tokens per batch at every length
    depths = task.window_depths(len(x)) if hasattr(task, "window_depths") else None
    groups = {None: slice(None)} if depths is None else {float(d): depths == d for d in depths.unique()}
    loss_sum = torch.zeros(length, dtype=torch.float64)  # (s,) summed loss of scored targets
    count = torch.zeros(length, dtype=torch.float64)  # (s,) number of scored targets
    correct, by_depth = 0.0, {}
    for depth, rows in groups.items():
        scores = evaluate(model, x[rows], y[rows], batch_size=batch, device=device)
        c = (y[rows] != IGNORE_INDEX).sum(0).double()
        loss_sum += torch.tensor(scores["per_position"], dtype=torch.float64) * c
        count += c
        correct += scores["accuracy"] * float(c.sum())
        if depth is not None:
            by_depth[depth] = scores["accuracy"]
    loss = float(loss_sum.sum() / count.sum())
    return {"loss": loss, "bpb": loss / math.log(2), "ppl": math.exp(min(loss, 700.0)),
            "accuracy": correct / float(count.sum()), "loss_sum": loss_sum, "count": count, "groups": by_depth}


def buckets(loss_sum: torch.Tensor, count: torch.Tensor, n: int) -> list[tuple[int, int, float]]:
    """(start, end, mean loss) over ``n`` equal position buckets, scored targets only."""
    length = len(loss_sum)
    edges = torch.linspace(0, length, min(n, length) + 1).round().long().tolist()
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        c = float(count[a:b].sum())
        out.append((a, b, float(loss_sum[a:b].sum()) / c if c else float("nan")))
    return out


def finetune(model: torch.nn.Module, setup: Setup, length: int, steps: int, on_log: Callable | None) -> None:
    """``steps`` steps at ``length`` with as many tokens per batch as in training, at the final
    learning rate of the training schedule (constant, no warmup)."""
    t = setup.train
    cfg = dataclasses.replace(t, steps=steps, seq_len=length, batch_size=max(1, t.batch_size * t.seq_len // length),
                              lr=t.lr * t.min_lr_ratio, min_lr_ratio=1.0, warmup_steps=0,
                              log_every=max(1, steps // 10), eval_every=steps, checkpoint_every=steps)
    train(model, lambda b, g: setup.task.train_batch(b, length, g), cfg, seed=setup.seed + 1, on_log=on_log)


# --- the protocol --------------------------------------------------------------------------------

def _trained(cell: Cell, root: Path, stage: Stage | None) -> tuple[torch.nn.Module, Path, bool]:
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


def run(
    cfgs: DictConfig | Sequence[DictConfig],
    *,
    results_root: Path,
    lengths: Sequence[int] | None = None,
    finetune_steps: int = 0,
    n_buckets: int = 16,
    stage: Stage | None = None,
) -> tuple[pd.DataFrame, RunDir]:
    """Evaluate every cell at every length; write the run directory; return the table.

    Rows: pe × scale × finetune_steps × metric (``bpb``, ``ppl`` for text; ``accuracy``, ``loss``
    for a generated task); one column per evaluated length. NaN where a scheme cannot represent
    the length (a learned table past its rows with scale ``none``).
    """
    cfgs = [cfgs] if isinstance(cfgs, DictConfig) else list(cfgs)
    cells, lengths = prepare(cfgs, lengths, finetune_steps)
    task = cells[0].setup.task
    answer_only = getattr(task, "answer_only", False)
    metrics = ("accuracy", "loss") if answer_only else ("bpb", "ppl")
    config = {"lengths": lengths, "finetune_steps": finetune_steps, "n_buckets": n_buckets,
              "cells": [c.setup.config for c in cells]}
    run_dir = RunDir.create(results_root, f"extrapolate-{cells[0].setup.config['choices']['task']}", config)
    started = time.perf_counter()
    try:
        rows, positions, depth_rows, models, notes = [], [], [], {}, []
        for cell in cells:
            if cell.key not in models:
                models[cell.key] = _trained(cell, Path(results_root), stage)
            trained, cache, reused = models[cell.key]
            device = resolve_device(cell.setup.train.device)
            for ft in ([0, finetune_steps] if finetune_steps else [0]):
                values = {m: {} for m in metrics}
                for length in lengths:
                    model = copy.deepcopy(trained)
                    cell.scale.apply(model.pe, length)
                    try:
                        if ft:
                            log = stage(f"finetune {cell.pe}/{cell.scale_name} at {length}", ft) if stage else None
                            finetune(model, cell.setup, length, ft, log)
                        scores = _score(model.to(device), task, length, cell.setup, device)
                    except PositionOutOfRange as e:
                        notes.append(f"{cell.pe}/{cell.scale_name} at {length}: {e}")
                        for m in metrics:
                            values[m][str(length)] = float("nan")
                        continue
                    for m in metrics:
                        values[m][str(length)] = scores[m]
                    head = {"pe": cell.pe, "scale": cell.scale_name, "finetune_steps": ft, "length": length}
                    for a, b, loss in buckets(scores["loss_sum"], scores["count"], n_buckets):
                        positions.append({**head, "start": a, "end": b, "loss": loss, "bits": loss / math.log(2)})
                    for depth, acc in scores["groups"].items():
                        depth_rows.append({**head, "depth": depth, "accuracy": acc})
                for m in metrics:
                    rows.append({"pe": cell.pe, "scale": cell.scale_name, "finetune_steps": ft, "metric": m, **values[m]})
        table = pd.DataFrame(rows)
        per_position = pd.DataFrame(positions)
        write_table(table, run_dir.path)
        write_table(per_position, run_dir.path, "per_position")
        if depth_rows:
            depth = pd.DataFrame(depth_rows).pivot_table(index=["pe", "scale", "finetune_steps", "depth"],
                                                         columns="length", values="accuracy").reset_index()
            depth.columns = [str(c) for c in depth.columns]
            write_table(depth, run_dir.path, "depth")
            plot_depth(depth, run_dir.path)
        plot(table, per_position, metrics[0], train_len=cells[0].setup.train.seq_len, folder=run_dir.path)
    except BaseException as e:
        run_dir.update_summary(status="failed", error=f"{type(e).__name__}: {e}")
        raise
    run_dir.update_summary(
        status="completed", run_dir=str(run_dir.path), seconds=time.perf_counter() - started, notes=notes,
        models=[{"pe": c.pe, "scale": c.scale_name, "cache": str(models[c.key][1]), "reused": models[c.key][2]}
                for c in cells])
    return table, run_dir


@dataclasses.dataclass
class ExtrapolationConfig:
    """The ``extrapolation`` node of ``experiment=extrapolation`` (the arguments of ``run``)."""

    scales: list[str] = dataclasses.field(default_factory=lambda: ["none"])
    factor: float | None = None
    lengths: list[int] | None = None
    finetune_steps: int = 0
    n_buckets: int = 16


def check_job(cfg: DictConfig) -> tuple[ExtrapolationConfig, list[DictConfig]]:
    """The settings and cells of a sweep job, every cell built and every length checked
    (``posenc sweep`` calls this for every job before any starts)."""
    settings = experiment_settings(cfg, "extrapolation", ExtrapolationConfig)
    cfgs = cells_of(cfg, settings.scales, settings.factor)
    prepare(cfgs, settings.lengths, settings.finetune_steps)
    return settings, cfgs


def job(cfg: DictConfig, *, results_root: Path) -> tuple[pd.DataFrame, RunDir]:
    """The sweep protocol (``experiment=extrapolation``): the config's scheme under every scale of
    ``extrapolation.scales`` that applies to it, trained once."""
    settings, cfgs = check_job(cfg)
    return run(cfgs, results_root=results_root, lengths=settings.lengths,
               finetune_steps=settings.finetune_steps, n_buckets=settings.n_buckets)


# --- plots ---------------------------------------------------------------------------------------

def plot(table: pd.DataFrame, per_position: pd.DataFrame, metric: str, train_len: int, folder: Path) -> list[Path]:
    """``length.png`` (the metric against evaluated length, log x) and ``per_position.png``
    (bucketed loss against position at the longest length); fine-tuned rows dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig, ax, name: str, xlabel: str, ylabel: str) -> Path:
        ax.axvline(train_len, color="grey", linestyle=":", label="train length")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        return save_figure(fig, folder / name)

    def label(pe: str, scale: str, ft: int) -> str:
        return f"{pe}/{scale}" + (f" +ft{ft}" if ft else "")

    cells = list(dict.fromkeys(zip(table.pe, table.scale)))
    palette = plt.get_cmap("tab10" if len(cells) <= 10 else "tab20")
    color = {cell: palette(i % palette.N) for i, cell in enumerate(cells)}  # one colour per cell in both plots
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lengths = [c for c in table.columns if c.isdigit()]
    for _, row in table[table.metric == metric].iterrows():
        ax.plot([int(n) for n in lengths], [row[n] for n in lengths], "--" if row.finetune_steps else "-",
                marker="o", color=color[(row.pe, row.scale)], label=label(row.pe, row.scale, row.finetune_steps))
    ax.set_xscale("log", base=2)
    ylabel = {"bpb": "bits per byte", "accuracy": "answer accuracy"}.get(metric, metric)
    paths = [save(fig, ax, "length.png", "evaluated length (tokens)", ylabel)]
    if len(per_position):
        longest = per_position.length.max()
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for (pe, scale, ft), part in per_position[per_position.length == longest].groupby(["pe", "scale", "finetune_steps"]):
            ax.plot((part.start + part.end) / 2, part.bits, "--" if ft else "-", marker=".", color=color[(pe, scale)],
                    label=label(pe, scale, ft))
        paths.append(save(fig, ax, "per_position.png", f"position (bucket centre), evaluated at {longest} tokens",
                          "loss (bits per token)"))
    return paths


def plot_depth(depth: pd.DataFrame, folder: Path) -> Path:
    """``depth.png``: answer accuracy by depth (rows) and length (columns), one panel per cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = [c for c in depth.columns if c.isdigit()]
    panels = list(depth.groupby(["pe", "scale", "finetune_steps"], sort=False))
    fig, axes = plt.subplots(1, len(panels), figsize=(2.2 + 2.2 * len(panels), 3.2), squeeze=False)
    for ax, ((pe, scale, ft), part) in zip(axes[0], panels):
        image = ax.imshow(part[lengths].to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(lengths)), lengths, rotation=45)
        ax.set_yticks(range(len(part)), [f"{d:g}" for d in part.depth] if ax is axes[0][0] else [])
        ax.set_title(f"{pe}/{scale}" + (f" +ft{ft}" if ft else ""), fontsize=9)
        ax.set_xlabel("length")
    axes[0][0].set_ylabel("depth of the key")
    fig.colorbar(image, ax=axes[0].tolist(), label="accuracy")
    return save_figure(fig, folder / "depth.png")
