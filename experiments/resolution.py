"""Protocol ``resolution``: train a ViT at one resolution, evaluate it at others (seed claims C3, C6, C7, C12).

For every scheme: train at ``task.resolution`` (or load the model from the cache,
``posenc.experiments.cache``, when the same training config ran before); for every evaluation resolution and every
method
that applies to the scheme (``posenc.pe.grid``), copy the model, move it to the new grid
(``ViT.set_resolution``: resample the table, or keep / rescale the coordinates) and score the
validation images rendered or resized to that resolution; optionally fine-tune the copy for a
few steps at the new resolution first. Learned tables also get the similarity analysis (C6).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig
from safetensors.torch import save

from posenc.analysis.similarity import cosine_similarity_matrix, grid_rank_correlation
from posenc.core.errors import ConfigError
from posenc.core.io import atomic_write_bytes
from posenc.engine.build import Setup, build
from posenc.engine.config import experiment_settings
from posenc.engine.context import Result, RunContext, TableSpec
from posenc.engine.evaluation import evaluate
from posenc.engine.results import RunDir
from posenc.engine.training import train
from posenc.experiments.cache import TRAINED_AT, trained
from posenc.models.vit import ViT, check_image_size
from posenc.pe.grid import METHODS
from posenc.pe.resample import MODES, SMOOTH_MODES
from posenc.reporting.style import (
    figure_format,
    legend_outside,
    panel_grid,
    pyplot,
    save_figure,
    series_styles,
    split_panels,
)

TABLES = (
    TableSpec(
        "table",
        keys=("pe", "method", "finetune_steps"),
        pairs=("seed",),
        main=True,
        description="accuracy per scheme x method x fine-tune, one column per evaluation resolution (<res>px)",
    ),
    TableSpec(
        "long",
        keys=("pe", "method", "finetune_steps", "resolution"),
        pairs=("seed",),
        description="the same accuracies, one row per evaluation resolution",
    ),
    TableSpec(
        "similarity",
        keys=("pe",),
        pairs=("seed",),
        description="rank correlation of a learned table's patch similarity with grid distance (C6)",
    ),
)


@dataclass
class ResolutionConfig:
    """The ``resolution`` node of ``experiment=resolution``."""

    resolutions: list[int] = field(default_factory=lambda: [16, 24, 32, 48, 64])
    methods: list[str] = field(default_factory=lambda: ["bicubic", "extrapolate", "interpolate"])
    # None: on for bilinear/bicubic (timm's default), see resample_grid; true/false: those two methods
    # with/without it. Nearest and area have no antialiased form and run as they are beside them.
    antialias: bool | None = None
    finetune_steps: int = 10
    finetune_lr: float = 1e-3
    eval_items: int | None = 256

    def __post_init__(self) -> None:
        if not self.resolutions or not self.methods:
            raise ConfigError("resolution.resolutions and resolution.methods must not be empty")
        for m in self.methods:
            if m not in METHODS:
                raise ConfigError(f"unknown interpolation method '{m}'; valid: {', '.join(METHODS)}")
        if self.antialias and not set(self.methods) & set(SMOOTH_MODES):
            raise ConfigError("resolution.antialias needs method bilinear or bicubic")
        if self.finetune_steps < 0:
            raise ConfigError(f"resolution.finetune_steps must be >= 0, got {self.finetune_steps}")
        if self.eval_items is not None and self.eval_items < 1:
            raise ConfigError(f"resolution.eval_items must be >= 1 or null, got {self.eval_items}")


def methods_for(valid: tuple[str, ...], requested: list[str]) -> list[str]:
    """The requested methods as a scheme can apply them, in order, without repeats.

    An interpolation mode asked of a coordinate scheme means ``interpolate`` (move its trained
    coordinates onto the new grid); ``extrapolate`` asked of a relative table means ``clip``;
    ``interpolate`` asked of a table means ``bicubic``; a scheme without positions has ``none``.
    """
    out: list[str] = []
    for m in requested:
        if m in valid:
            pick = m
        elif m in MODES and "interpolate" in valid:
            pick = "interpolate"
        elif m == "extrapolate" and "clip" in valid:
            pick = "clip"
        elif m == "interpolate" and "bicubic" in valid:
            pick = "bicubic"
        elif valid == ("none",):
            pick = "none"
        else:
            continue
        if pick not in out:
            out.append(pick)
    return out


def _settings(cfg: DictConfig) -> ResolutionConfig:
    return experiment_settings(cfg, "resolution", ResolutionConfig)


def _check(setup: Setup, settings: ResolutionConfig) -> list[str]:
    name = setup.config["choices"]["pe"]
    if not isinstance(setup.model, ViT):
        raise ConfigError(
            f"the resolution experiment needs the ViT (model=vit_tiny), got model '{setup.config['choices']['model']}'"
        )
    for res in settings.resolutions:
        check_image_size(res, setup.model.patch_size, "resolution")
    valid = setup.model.pe.grid_methods
    methods = methods_for(valid, settings.methods)
    if not methods:
        raise ConfigError(
            f"none of the methods {', '.join(settings.methods)} applies to pe '{name}'; valid: {', '.join(valid)}"
        )
    return methods


def _embeddings(model: ViT) -> torch.Tensor | None:
    return model.patch_embeddings() if model.pe.adds_embedding else None


def plot_similarity(similarity: torch.Tensor, grid: tuple[int, int], title: str, path: Path) -> None:
    """The ViT paper's figure: tile (r, c) shows patch (r, c)'s similarity to every patch."""
    plt = pyplot()

    h, w = grid
    tiles = similarity.reshape(h, w, h, w).float()  # (r, c, r', c')
    mosaic = torch.full((h * (h + 1), w * (w + 1)), float("nan"))
    for r in range(h):
        for c in range(w):
            mosaic[r * (h + 1) : r * (h + 1) + h, c * (w + 1) : c * (w + 1) + w] = tiles[r, c]
    fig, ax = plt.subplots(figsize=(6, 6))
    im = ax.imshow(mosaic.numpy(), cmap="viridis", vmin=-1, vmax=1)
    ax.set_title(title, fontsize=9)
    ax.axis("off")
    fig.colorbar(im, ax=ax, fraction=0.046, label="cosine similarity")
    save_figure(fig, path, dpi=110, tight=True)


def plot_accuracy(long: pd.DataFrame, train_resolution: int, chance: float, path: Path) -> None:
    """Accuracy against evaluation resolution (pixels), one line per scheme x method (a colour per
    scheme, a line style and marker per method), a panel per fine-tune budget, and a row of them
    per scheme past ``MAX_SERIES`` lines; one legend outside the data."""
    plt = pyplot()

    steps = sorted(long["finetune_steps"].unique())
    series = list(dict.fromkeys(zip(long["pe"], long["method"])))
    styles = series_styles(series)
    groups = split_panels(series)
    split = len(groups) > 1
    fig, axes = panel_grid(plt, len(groups) * len(steps), columns=len(steps), sharex=True, sharey=True)
    for ax, (cells, ft) in zip(axes, [(cells, ft) for cells in groups for ft in steps]):
        for pe, method in cells:
            part = long[(long.finetune_steps == ft) & (long.pe == pe) & (long.method == method)]
            label = method if split else f"{pe} / {method}"
            ax.plot(part["resolution"], part["accuracy"], label=label, **styles[pe, method].kwargs())
        ax.axvline(train_resolution, color="grey", linewidth=0.8, label="training resolution")
        ax.axhline(chance, color="grey", linestyle=":", linewidth=0.8, label="chance")
        title = "no fine-tune" if ft == 0 else f"after {ft} fine-tune steps at each resolution"
        ax.set_title(f"{cells[0][0]}: {title}" if split else title, fontsize=9)
        ax.set_xlabel("evaluation resolution (pixels)")
    for ax in axes[:: len(steps)]:
        ax.set_ylabel("accuracy")
    legend_outside(fig, axes, title="method" if split else "scheme / method", neutral=split)
    save_figure(fig, path, dpi=110)


def run(cfgs: list[DictConfig], ctx: RunContext) -> Result:
    """One config per scheme (same resolution settings), into one run folder; returns the wide
    accuracy table (``table``), ``long`` and, for schemes that add an embedding, ``similarity``.

    Every config is built and checked before the run folder exists.
    """
    if not cfgs:
        raise ConfigError("no scheme to run")
    settings = _settings(cfgs[0])
    fmt = figure_format(cfgs[0])  # a bad plots.format stops here, before any work
    setups = [build(c) for c in cfgs]
    plans = [_check(s, settings) for s in setups]
    names = [s.config["choices"]["pe"] for s in setups]
    if len(set(names)) != len(names):
        raise ConfigError(f"each scheme once, please: {', '.join(names)}")
    config = {"resolution": dataclasses.asdict(settings), "runs": [s.config for s in setups]}
    task = setups[0].task
    chance = 1 / task.num_classes
    with ctx.running("resolution-" + "-".join(names), config) as run_dir:
        long, similarity, models = _run(setups, plans, settings, run_dir, ctx.cache_dir(setups[0].config), ctx)
        table = long.pivot_table(
            index=["pe", "method", "finetune_steps", "seed"], columns="resolution", values="accuracy", sort=False
        ).reset_index()
        table.columns = [c if isinstance(c, str) else f"{c}px" for c in table.columns]
        ended = long[["pe", *TRAINED_AT]].drop_duplicates("pe")  # one row per scheme: how its training ended
        held_out = long[["pe", "split", "items"]].drop_duplicates("pe")  # the split the cells read, its items
        table = table.merge(held_out, on="pe", how="left").merge(ended, on="pe", how="left")
        tables = {"table": table, "long": long}
        if similarity:
            tables["similarity"] = pd.DataFrame(similarity)
        result = ctx.write(run_dir, TABLES, tables)
        plot_accuracy(long, task.resolution, chance, run_dir.path / f"accuracy.{fmt}")
        run_dir.update_summary(
            train_resolution=task.resolution,
            chance=chance,
            similarity=similarity,
            training=ended.astype(object).where(ended.notna(), None).to_dict("records"),
            models=models,
        )
    return result


class Resolution:
    """The protocol of ``experiment=resolution``: the config's one scheme, trained (or taken from
    the cache) at ``task.resolution`` and scored at every resolution x method."""

    tables = TABLES

    def check(self, cfg: DictConfig) -> None:
        """The settings, the model and every method checked against the scheme, the setup built."""
        _check(build(cfg), _settings(cfg))

    def run(self, cfg: DictConfig, ctx: RunContext) -> Result:
        return run([cfg], ctx)


def _run(
    setups: list[Setup],
    plans: list[list[str]],
    settings: ResolutionConfig,
    run_dir: RunDir,
    cache: Path,
    ctx: RunContext,
) -> tuple[pd.DataFrame, list[dict[str, Any]], list[dict[str, Any]]]:
    """The long table, the similarity rows and, per scheme, where its model came from."""
    rows: list[dict[str, Any]] = []
    similarity: list[dict[str, Any]] = []
    models: list[dict[str, Any]] = []
    device = ctx.device
    for setup, methods in zip(setups, plans):
        name, model, task, ev = setup.config["choices"]["pe"], setup.model, setup.task, setup.eval
        grid0 = model.grid
        init = _embeddings(model)
        started = time.perf_counter()
        # the training of posenc train (posenc.experiments.train.fit): at task.resolution, to the target
        model_of = trained(setup, cache, ctx.stage)
        seed = {"seed": setup.seed}
        trained_at = {k: model_of.record[k] for k in TRAINED_AT}
        models.append({"pe": name, "cache": str(model_of.folder), "reused": model_of.reused})
        ctx.log(
            run_dir,
            {
                "pe": name,
                **seed,
                "train_loss": model_of.record["train_loss"],
                **trained_at,
                "cache": str(model_of.folder),
                "reused": model_of.reused,
                "seconds": time.perf_counter() - started,
            },
        )
        weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        atomic_write_bytes(run_dir.path / "checkpoints" / f"{name}.safetensors", save(weights))
        learned = _embeddings(model)
        if learned is not None:
            sim = cosine_similarity_matrix(learned.cpu())
            corr_init = grid_rank_correlation(cosine_similarity_matrix(init.cpu()), grid0)
            similarity.append(
                {
                    "pe": name,
                    **seed,
                    "rank_corr_init": corr_init,
                    "rank_corr_trained": grid_rank_correlation(sim, grid0),
                    **trained_at,
                }
            )
            plot_similarity(
                sim,
                grid0,
                f"{name}: position-embedding similarity (rank corr. {similarity[-1]['rank_corr_trained']:.2f})",
                run_dir.path / f"similarity_{name}.{figure_format(setup.config)}",
            )
        ft_cfg = dataclasses.replace(
            setup.train,
            steps=max(settings.finetune_steps, 1),
            lr=settings.finetune_lr,
            warmup_steps=max(1, settings.finetune_steps // 10),
        )
        label = f"resolution {name}: evaluate"
        ctx.emit("stage", label, total=len(settings.resolutions) * len(methods))
        for i, res in enumerate(settings.resolutions):
            images, labels = task.eval_set(res, settings.eval_items, "test")  # training validated on "val"
            for j, method in enumerate(methods):
                antialias = settings.antialias if method in SMOOTH_MODES else None
                moved = copy.deepcopy(model).set_resolution(res, method, antialias)
                cell = {"pe": name, "method": method, "finetune_steps": 0, "resolution": res, **seed}
                held_out = {"split": "test", "items": len(labels)}
                acc = evaluate(moved, images, labels, batch_size=ev.batch_size, device=device)["accuracy"]
                rows.append({**cell, "accuracy": acc, **held_out, **trained_at})
                if settings.finetune_steps:
                    train(moved, lambda b, g, r=res: task.train_batch(b, r, g), ft_cfg, seed=setup.seed)
                    acc = evaluate(moved, images, labels, batch_size=ev.batch_size, device=device)["accuracy"]
                    rows.append(
                        {**cell, "finetune_steps": settings.finetune_steps, "accuracy": acc, **held_out, **trained_at}
                    )
                ctx.emit("advance", label, done=i * len(methods) + j + 1, info=f"{res}px {method}")
    return pd.DataFrame(rows), similarity, models
