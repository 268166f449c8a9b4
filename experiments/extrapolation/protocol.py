"""The extrapolation run: check every cell and length, train (or reuse) each model, score it
rescaled at every length, write the tables and plots.

At each evaluated length a copy of the trained model is rescaled (``posenc.pe.scaling``) and
scored; with ``finetune_steps`` a second copy is first fine-tuned at that length with the scaling
applied (the PI / YaRN protocol).

One recipe per comparison: every scheme of a table trains with the same settings, or, where one
setting cannot bring every scheme to its target, each picks from the same declared grid
(``extrapolation.recipes``: train.* values) by one rule on its validation split (``pick``); the
table records the pick and the ``recipes`` table every candidate.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig, OmegaConf

from posenc.core.errors import ConfigError, Interrupted, UserError
from posenc.engine.build import Setup, build
from posenc.engine.config import experiment_settings, instantiate
from posenc.engine.context import Result, RunContext, TableSpec
from posenc.engine.evaluation import evaluate
from posenc.engine.results import RunDir, append_jsonl, read_jsonl
from posenc.engine.signals import deferred_stop_signals
from posenc.engine.training import TrainConfig, under_target
from posenc.experiments.cache import TRAINED_AT, Trained, model_key, trained
from posenc.experiments.extrapolation.plan import cells_of, scale_class, scale_options
from posenc.experiments.extrapolation.plots import plot, plot_depth
from posenc.experiments.extrapolation.scoring import buckets, finetune, score
from posenc.pe.base import PositionOutOfRange
from posenc.reporting.style import figure_format

MULTIPLES = (1, 2, 4, 8, 16)


@dataclasses.dataclass
class Cell:
    """One (scheme, scale) pair; cells with the same ``key`` (``model_key``: the hash of what
    determines the trained weights) share one model, trained by the first of them."""

    pe: str
    scale_name: str
    setup: Setup
    scale: Any
    key: str
    recipe: str = ""  # the grid point it trained with (``recipe_label``); "" without a grid


def recipe_grid(grid: Mapping[str, Sequence[Any]] | None) -> list[dict[str, Any]]:
    """Every combination of the declared ``train.*`` values, in grid order; ``[{}]`` without a grid."""
    if not grid:
        return [{}]
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    for name, values in grid.items():
        if name not in fields:
            raise ConfigError(
                f"extrapolation.recipes: '{name}' is not a train setting; valid: {', '.join(sorted(fields))}"
            )
        if not isinstance(values, Sequence) or isinstance(values, str) or not values:
            raise ConfigError(f"extrapolation.recipes.{name} must be a non-empty list of values, got {values!r}")
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def recipe_label(recipe: Mapping[str, Any]) -> str:
    """``train.lr=0.001 train.pe_lr_scale=10``: a grid point as the overrides that make it."""
    return " ".join(f"train.{k}={v:g}" if isinstance(v, float) else f"train.{k}={v}" for k, v in recipe.items())


def with_recipe(cfg: DictConfig, recipe: Mapping[str, Any]) -> DictConfig:
    """A copy of ``cfg`` training with the grid point ``recipe``."""
    out = copy.deepcopy(cfg)
    for name, value in recipe.items():
        OmegaConf.update(out, f"train.{name}", value)
    return out


def pick(candidates: Sequence[Mapping[str, Any]]) -> int:
    """The declared selection rule, the same for every scheme: among the grid points whose model
    reached its target on validation, the one that got there in the fewest steps; if none did,
    the best validation score (``val_score``: accuracy, or bits per byte for text, lower better);
    ties go to the earlier grid point. Returns the index into ``candidates``."""

    def rank(i: int) -> tuple:
        c = candidates[i]
        score = -c["val_score"] if c["criterion"] != "bpb" else c["val_score"]
        return (not c["reached_target"], c["target_step"] if c["reached_target"] else 0, score, i)

    return min(range(len(candidates)), key=rank)


def prepare(
    cfgs: Sequence[DictConfig], lengths: Sequence[int] | None, finetune_steps: int
) -> tuple[list[Cell], list[int]]:
    """Build every cell and check every length; raise ``ConfigError`` on the first mistake."""
    if finetune_steps < 0:
        raise ConfigError(f"finetune steps must be >= 0, got {finetune_steps}")
    cells = []
    for cfg in cfgs:
        figure_format(cfg)  # a bad plots.format stops here, before any work
        setup = build(cfg)
        scale = instantiate(cfg.scale, "scale")
        choices, pe = setup.config["choices"], setup.model.pe
        if not scale.applies(pe):
            fits = [s for s, node in scale_options().items() if scale_class(node).applies(pe)]
            raise ConfigError(
                f"scale '{choices['scale']}' does not apply to pe '{choices['pe']}': it rescales "
                f"{scale.acts_on}; scales for {choices['pe']}: {', '.join(fits)}"
            )
        try:
            scale.check(pe)
        except ConfigError as e:
            raise ConfigError(f"scale '{choices['scale']}' with pe '{choices['pe']}': {e}") from None
        # a remapped cell reads as its scale and remap: yarn+self_extend
        label = f"{choices['scale']}+{choices['remap']}" if setup.remap.active else choices["scale"]
        cells.append(Cell(choices["pe"], label, setup, scale, model_key(setup)))
    train_lens = {c.setup.train.seq_len for c in cells}
    if len(train_lens) != 1:
        raise ConfigError(f"every cell must train at one length, got {sorted(train_lens)}")
    train_len = train_lens.pop()
    lengths = sorted(set(lengths)) if lengths else [train_len * m for m in MULTIPLES]
    for length in lengths:
        if length < 1:
            raise ConfigError(f"evaluation length must be >= 1, got {length}")
        cells[0].setup.task.check_length(length, "val")
    for cell in cells:
        cell.setup.remap.check_lengths(max(lengths))
    return cells, lengths


def run_name(cells: Sequence[Cell]) -> str:
    """``extrapolate-<task>-<schemes>-<scales>`` (``extrapolate-passkey-rope+alibi-none+yarn``; past
    four, their count), so that a run folder names what it ran."""

    def listed(names: Any, what: str) -> str:
        distinct = list(dict.fromkeys(names))
        return "+".join(distinct) if len(distinct) <= 4 else f"{len(distinct)}{what}"

    task = cells[0].setup.config["choices"]["task"]
    return f"extrapolate-{task}-{listed((c.pe for c in cells), 'pe')}-{listed((c.scale_name for c in cells), 'scales')}"


TABLES = (
    TableSpec(
        "table",
        keys=("pe", "scale", "finetune_steps", "metric"),
        pairs=("seed",),
        main=True,
        description=(
            "one row per cell, fine-tune and metric (exact_match, accuracy, loss; or bpb, ppl) on the test split; "
            "one column per evaluated length; items: the sequences scored at a length (the fewest over lengths), "
            "chance: the metric's score by guessing (the unigram baseline for bpb)"
        ),
    ),
    TableSpec(
        "per_position",
        keys=("pe", "scale", "finetune_steps", "length", "start"),
        pairs=("seed",),
        description="the loss in position buckets at every evaluated length",
    ),
    TableSpec(
        "depth",
        keys=("pe", "scale", "finetune_steps", "metric", "depth"),
        pairs=("seed",),
        description="exact match and digit accuracy by depth of the key and length (passkey), test split, "
        "items sequences in every cell",
    ),
    TableSpec(
        "recipes",
        keys=("pe", "recipe"),
        pairs=("seed",),
        description=(
            "every grid point of extrapolation.recipes for each scheme: its validation score, the pick, and "
            "trained_as, the grid point whose training made its model (a point that cannot act on the scheme, "
            "pe_lr_scale without position parameters, shares the earlier point's model)"
        ),
    ),
)


def extrapolate(
    cfgs: DictConfig | Sequence[DictConfig],
    ctx: RunContext,
    *,
    lengths: Sequence[int] | None = None,
    finetune_steps: int = 0,
    n_buckets: int = 16,
    recipes: Sequence[str] | None = None,
    finetune_at: int | None = None,
) -> Result:
    """Evaluate every cell at every length into one run folder opened through ``ctx``; return
    its tables (``TABLES``: ``table``, ``per_position``, and ``depth`` for a task with depths).

    ``table`` rows: pe × scale × finetune_steps × metric (``bpb``, ``ppl`` for text; ``accuracy``,
    ``loss`` for a generated task), with the seed; one column per evaluated length (NaN where a
    scheme cannot represent the length: a learned table past its rows with scale ``none``), then
    how the cell's model trained (``TRAINED_AT``: steps, criterion, target, reached_target,
    target_step). A model comes from the cache folder (``cache_dir``, default
    ``<results root>/cache``) when trained there before.

    Each length of each cell is appended to the run's ``cells.jsonl`` once scored
    (``ScoredCells``); a run resumed (``ctx.resume``: ``posenc extrapolate --resume``, a requeued
    sweep job) scores only the lengths missing there, and its tables equal an uninterrupted run's.
    A stop signal (Ctrl-C, a scheduler's SIGTERM) waits for the end of the length in progress.

    With ``finetune_at`` (a fixed target length: ``extrapolation.factor`` × L), each scaled model
    is fine-tuned once there and that model is scored at every length, as PI and YaRN fine-tune
    at their target; without it, each length gets its own fine-tune.

    ``recipes`` names the grid point of each config (``recipe_label``): a scheme trained under
    several is scored only under the one ``pick`` chooses, and the ``recipes`` table lists them all.
    """
    cfgs = [cfgs] if isinstance(cfgs, DictConfig) else list(cfgs)
    cells, lengths = prepare(cfgs, lengths, finetune_steps)
    fmt = figure_format(cells[0].setup.config)
    for cell, recipe in zip(cells, recipes or []):
        cell.recipe = recipe
    devices = [cell.setup.place(ctx.device) for cell in cells]
    task = cells[0].setup.task
    metrics = ("exact_match", "accuracy", "loss") if task.answer_only else ("bpb", "ppl")
    chance = task.chance() if task.answer_only else {"bpb": task.unigram_bits_per_byte()}
    config = {
        "lengths": lengths,
        "finetune_steps": finetune_steps,
        "n_buckets": n_buckets,
        "finetune_at": finetune_at,
        "cells": [c.setup.config for c in cells],
    }
    cache = ctx.cache_dir(cells[0].setup.config)
    with ctx.running(run_name(cells), config) as run:
        started = time.perf_counter()
        store = ScoredCells(run.path)
        out = Rows()
        models: dict[str, Trained] = {}
        try:
            for cell in cells:
                if cell.key not in models:
                    models[cell.key] = trained(cell.setup, cache, ctx.stage)
        except Interrupted as e:  # the cache dropped the unfinished training: the run folder resumes
            kept = f"{len(store.done)} scored cells" if store.done else "the run's config"
            kept = f"the unfinished training was discarded, {kept} kept"
            raise Interrupted(e.signum, None, run.path, kept=kept) from None
        chosen, recipe_rows = choose_recipes(cells, models, ctx.device)
        for cell in chosen:
            line = under_target(f"{cell.pe} (seed {cell.setup.seed})", models[cell.key].record)
            if line and line not in out.notes:
                ctx.emit("message", line, warning=True)
                out.notes.append(line)
        picked = {id(c) for c in chosen}
        runs = [
            (cell, device, ft)
            for cell, device in zip(cells, devices)
            if id(cell) in picked
            for ft in ([0, finetune_steps] if finetune_steps else [0])
        ]
        heads = [head_of(cell, ft, recipes, finetune_at) for cell, _, ft in runs]
        planned = [cell_key(head, n) for head in heads for n in lengths]
        reused = sum(k in store.done for k in planned)
        if reused:
            ctx.emit("message", f"resuming: {reused} of {len(planned)} cells already scored")
        try:
            for (cell, device, ft), head in zip(runs, heads):
                model_of = models[cell.key]
                records = scored_lengths(cell, ft, head, lengths, model_of.model, store, ctx, run, device, n_buckets)
                out.add(head, lengths, records, metrics, chance, model_of)
        except Interrupted as e:  # between two cells: the scored ones are in cells.jsonl
            kept = f"{sum(k in store.done for k in planned)} of {len(planned)} cells scored and kept"
            raise Interrupted(e.signum, None, run.path, kept=kept) from None
        tables = {"table": pd.DataFrame(out.table), "per_position": pd.DataFrame(out.per_position)}
        if recipe_rows:
            tables["recipes"] = pd.DataFrame(recipe_rows)
        if out.depth:
            long = pd.DataFrame(out.depth)
            index = [
                "pe",
                "scale",
                "finetune_steps",
                "seed",
                *(["recipe"] if recipes else []),
                "metric",
                "depth",
            ]
            depth = long.pivot_table(index=index, columns="length", values="value", sort=False).reset_index()
            depth.columns = [str(c) for c in depth.columns]
            cells_n = long.groupby(index, sort=False)["items"].min().reset_index()  # the same at every length
            depth = depth.merge(cells_n, on=index).assign(split="test", chance=lambda d: d.metric.map(chance))
            ended = pd.DataFrame([{"pe": c.pe, **{k: models[c.key].record[k] for k in TRAINED_AT}} for c in cells])
            tables["depth"] = depth.merge(ended.drop_duplicates("pe"), on="pe", how="left")  # how each model trained
            plot_depth(tables["depth"][tables["depth"].metric == "exact_match"], run.path, fmt)
        plot(
            tables["table"],
            tables["per_position"],
            metrics[0],
            train_len=cells[0].setup.train.seq_len,
            folder=run.path,
            fmt=fmt,
        )
        run.update_summary(
            device=", ".join(dict.fromkeys(map(str, devices))),
            seconds=time.perf_counter() - started,
            notes=out.notes,
            cells={"scored": len(planned) - reused, "reused": reused},
            models=[
                {
                    "pe": c.pe,
                    "scale": c.scale_name,
                    "cache": str(models[c.key].folder),
                    "reused": models[c.key].reused,
                    **models[c.key].record,
                }
                for c in cells
            ],
        )
        return ctx.write(run, TABLES, tables)


@dataclasses.dataclass
class Rows:
    """The rows of ``table``, ``per_position`` and ``depth``, and the run's notes, added cell by cell."""

    table: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    per_position: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    depth: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def add(
        self,
        head: Mapping[str, Any],
        lengths: Sequence[int],
        records: Sequence[Mapping[str, Any]],
        metrics: Sequence[str],
        chance: Mapping[str, Any],
        trained: Trained,
    ) -> None:
        """One cell and fine-tune (``head``): its record at each length (``measure``), its model."""
        values, items = {m: {} for m in metrics}, []
        for length, record in zip(lengths, records):
            if "note" in record:  # the scheme cannot represent this length
                self.notes.append(record["note"])
                for m in metrics:
                    values[m][str(length)] = float("nan")
                continue
            for m in metrics:
                values[m][str(length)] = record["scores"][m]
            items.append(record["items"])
            for a, b, loss in record["buckets"]:
                self.per_position.append(
                    {**head, "length": length, "start": a, "end": b, "loss": loss, "bits": loss / math.log(2)}
                )
            for depth, got in record["groups"]:
                for m in ("exact_match", "accuracy"):
                    self.depth.append(
                        {**head, "metric": m, "length": length, "depth": depth, "value": got[m], "items": got["items"]}
                    )
        n = min(items, default=0)
        trained_at = {k: trained.record[k] for k in TRAINED_AT}
        params = sum(p.numel() for p in trained.model.parameters())  # for scale trends
        for m in metrics:
            self.table.append(
                {
                    **head,
                    "metric": m,
                    **values[m],
                    "split": "test",
                    "items": n,
                    "chance": chance.get(m),
                    **trained_at,
                    "params": params,
                }
            )


CELLS_FILE = "cells.jsonl"


class ScoredCells:
    """The cells (scheme × scale × fine-tune × length) a run has scored: one JSON line each in
    its folder's ``cells.jsonl``, appended as each is scored, so that a resumed run scores only
    the others and an interruption loses at most the cell in progress (a line it tore is skipped
    on read, and that cell scored again)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / CELLS_FILE
        self.done = {r["key"]: r for r in read_jsonl(self.path)}

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append ``record`` (with its ``key``); kept as read back, so a fresh and a resumed run
        build their tables from the same values."""
        record = json.loads(json.dumps(record))
        append_jsonl(self.path, record)
        self.done[record["key"]] = record
        return record


def head_of(cell: Cell, ft: int, recipes: Sequence[str] | None, finetune_at: int | None) -> dict[str, Any]:
    """The columns that name one cell and fine-tune in every table."""
    head = {"pe": cell.pe, "scale": cell.scale_name, "finetune_steps": ft, "seed": cell.setup.seed}
    head |= {"recipe": cell.recipe} if recipes else {}
    head |= {"finetune_length": finetune_at} if ft and finetune_at else {}
    return head


def cell_key(head: Mapping[str, Any], length: int) -> str:
    """``cells.jsonl``'s name for one length of one cell."""
    return json.dumps({**head, "length": length}, sort_keys=True)


def scored_lengths(
    cell: Cell,
    ft: int,
    head: Mapping[str, Any],
    lengths: Sequence[int],
    base: torch.nn.Module,
    store: ScoredCells,
    ctx: RunContext,
    run: RunDir,
    device: torch.device,
    n_buckets: int,
) -> list[dict[str, Any]]:
    """The record of every length of one cell and fine-tune: read back from ``store`` when
    scored before, else scored now and appended. With a ``finetune_length`` in ``head``, ``base``
    is fine-tuned there once (when some length is left to score) and scored at every length; else
    each length gets its own fine-tune of ``ft`` steps. Stop signals wait for the end of each."""
    tuned = None
    for length in lengths:
        key = cell_key(head, length)
        if key in store.done:
            continue
        at = head.get("finetune_length")
        if at is not None and tuned is None:
            tuned = between_cells(lambda: rescaled(base, cell, at, ft, ctx), run)
        model, per_length = (base, ft) if tuned is None else (tuned, 0)
        between_cells(
            lambda: store.add({"key": key, **measure(model, cell, length, per_length, ctx, device, n_buckets)}), run
        )
    return [store.done[cell_key(head, length)] for length in lengths]


def between_cells(work: Callable[[], Any], run: RunDir) -> Any:
    """``work()`` with stop signals held until it returns, then delivered (``Interrupted``): a
    run stops between two cells, never inside one."""
    with deferred_stop_signals(run.path) as stop:
        out = work()
        if stop():
            stop.deliver(0)
    return out


def rescaled(base: torch.nn.Module, cell: Cell, length: int, steps: int, ctx: RunContext) -> torch.nn.Module:
    """A copy of ``base`` rescaled to ``length``, the cell's position remap on top of the scale,
    fine-tuned there ``steps`` steps (none: 0)."""
    model = copy.deepcopy(base)
    cell.scale.apply(model.pe, length)
    model.set_remap(cell.setup.remap)
    if steps:
        log = ctx.stage(f"finetune {cell.pe}/{cell.scale_name} at {length}", steps)
        finetune(model, cell.setup, length, steps, log)
    return model


def measure(
    base: torch.nn.Module,
    cell: Cell,
    length: int,
    finetune_steps: int,
    ctx: RunContext,
    device: torch.device,
    n_buckets: int,
) -> dict[str, Any]:
    """One length of one cell as a record: ``base`` rescaled to ``length`` (and fine-tuned there
    ``finetune_steps`` steps first), scored: its scores, the sequences scored, the loss by
    position bucket and the scores by depth; or, where the scheme cannot represent the length, a
    ``note`` saying so."""
    try:
        model = rescaled(base, cell, length, finetune_steps, ctx)
        scores = score(model.to(device), cell.setup.task, length, cell.setup, device)
    except PositionOutOfRange as e:
        return {"note": f"{cell.pe}/{cell.scale_name} at {length}: {e}"}
    return {
        "scores": {m: scores[m] for m in ("loss", "bpb", "ppl", "accuracy", "exact_match")},
        "items": scores["items"],
        "buckets": buckets(scores["loss_sum"], scores["count"], n_buckets),
        "groups": list(scores["groups"].items()),  # (depth, its scores) pairs
    }


def resumed(path: Path) -> tuple[list[DictConfig], dict[str, Any]]:
    """The cells and the settings (``extrapolate``'s keywords) of the extrapolation run in
    ``path``: what ``posenc extrapolate --resume RUN`` scores when given no other option."""
    saved = RunDir.open(path).read_config()
    if not isinstance(saved, dict) or "cells" not in saved:
        raise UserError(f"'{path}' is not an extrapolation run (its config.yaml lists no cells)")
    settings = {k: saved[k] for k in ("lengths", "finetune_steps", "n_buckets", "finetune_at")}
    return [OmegaConf.create(c) for c in saved["cells"]], settings


def choose_recipes(
    cells: Sequence[Cell], models: Mapping[str, Trained], device: Any
) -> tuple[list[Cell], list[dict[str, Any]]]:
    """The cells of each scheme's picked recipe, and one row per (scheme, grid point) when some
    scheme trained under more than one: how it trained, its validation score, whether picked."""
    by_pe: dict[str, dict[str, list[Cell]]] = {}
    for cell in cells:
        by_pe.setdefault(cell.pe, {}).setdefault(cell.recipe, []).append(cell)
    if all(len(options) == 1 for options in by_pe.values()):
        return list(cells), []
    trained_as = {}  # model key -> the grid point whose config trained it (the first to need it)
    for cell in cells:
        trained_as.setdefault(cell.key, cell.recipe)
    chosen, rows = [], []
    for pe, options in by_pe.items():
        candidates = []
        for recipe, group in options.items():
            setup, record = group[0].setup, models[group[0].key].record
            data = setup.task.eval_set(setup.train.seq_len, setup.eval.max_windows, "val")
            scores = evaluate(models[group[0].key].model, *data, batch_size=setup.eval.batch_size, device=device)
            score = scores["bits"] if record["criterion"] == "bpb" else scores["accuracy"]
            candidates.append(
                {
                    "pe": pe,
                    "seed": setup.seed,
                    "recipe": recipe,
                    "trained_as": trained_as[group[0].key],
                    **record,
                    "val_score": score,
                }
            )
        best = pick(candidates)
        chosen += list(options.values())[best]
        rows += [{**c, "picked": i == best} for i, c in enumerate(candidates)]
    picked = {id(c) for c in chosen}
    return [c for c in cells if id(c) in picked], rows


@dataclasses.dataclass
class ExtrapolationConfig:
    """The ``extrapolation`` node of ``experiment=extrapolation`` (the arguments of ``extrapolate``)."""

    scales: list[str] = dataclasses.field(default_factory=lambda: ["none"])
    factor: float | None = None
    lengths: list[int] | None = None
    finetune_steps: int = 0
    n_buckets: int = 16
    # a declared grid of train settings ({lr: [1e-3, 3e-3], pe_lr_scale: [1, 10]}); each scheme
    # trains at every point and is scored under the one ``pick`` chooses on validation
    recipes: dict[str, list[Any]] | None = None


def job_plan(cfg: DictConfig) -> tuple[ExtrapolationConfig, list[DictConfig], list[str]]:
    """The settings and cells of a sweep job (with each cell's recipe), every cell built and
    every length checked."""
    settings = experiment_settings(cfg, "extrapolation", ExtrapolationConfig)
    cfgs, labels = [], []
    for recipe in recipe_grid(settings.recipes):
        cells = cells_of(with_recipe(cfg, recipe), settings.scales, settings.factor)
        cfgs += cells
        labels += [recipe_label(recipe)] * len(cells)
    prepare(cfgs, settings.lengths, settings.finetune_steps)
    return settings, cfgs, labels if settings.recipes else []


def finetune_length(settings: ExtrapolationConfig, cfg: DictConfig) -> int | None:
    """The one length a fixed factor fine-tunes at (factor × train.seq_len), else None."""
    if not (settings.finetune_steps and settings.factor):
        return None
    return round(settings.factor * cfg.train.seq_len)


class Extrapolation:
    """The sweep protocol (``experiment=extrapolation``): the config's scheme under every scale
    of ``extrapolation.scales`` that applies to it, trained once, scored at every length."""

    tables = TABLES

    def check(self, cfg: DictConfig) -> None:
        job_plan(cfg)

    def run(self, cfg: DictConfig, ctx: RunContext) -> Result:
        settings, cfgs, recipes = job_plan(cfg)
        return extrapolate(
            cfgs,
            ctx,
            lengths=settings.lengths,
            finetune_steps=settings.finetune_steps,
            n_buckets=settings.n_buckets,
            recipes=recipes,
            finetune_at=finetune_length(settings, cfg),
        )
