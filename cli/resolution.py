"""``posenc resolution``: train a ViT at one resolution, evaluate it at others."""

from __future__ import annotations

from typing import Annotated

import typer

from posenc.cli.common import (
    ConfigDir,
    EventBar,
    Overrides,
    Quiet,
    ResultsDir,
    Seed,
    Steps,
    console,
    overrides_from,
    print_frame,
    user_errors,
)
from posenc.cli.completion import options_of
from posenc.core.text import split_list


def resolution(
    pe: Annotated[
        str | None,
        typer.Option(
            help="Comma list of position schemes (see `posenc list pe`). Default: every 2D scheme.",
            autocompletion=options_of("pe"),
        ),
    ] = None,
    interp: Annotated[
        str | None,
        typer.Option(
            help="Comma list of methods: nearest, bilinear, bicubic, area, "
            "clip, extrapolate, interpolate. Default: bicubic,extrapolate,interpolate."
        ),
    ] = None,
    res: Annotated[
        str | None, typer.Option(help="Comma list of evaluation resolutions in px. Default: 16,24,32,48,64.")
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(help="Image task (shapes, cifar10, mnist, image_folder).", autocompletion=options_of("task")),
    ] = None,
    finetune_steps: Annotated[
        int | None, typer.Option(help="Fine-tune steps at each resolution (0: none). Default: 10.")
    ] = None,
    antialias: Annotated[
        bool | None,
        typer.Option(
            "--antialias/--no-antialias",
            help="Antialias bilinear/bicubic table resampling. Default: on, as timm's resample_abs_pos_embed.",
        ),
    ] = None,
    steps: Steps = None,
    seed: Seed = None,
    results_dir: ResultsDir = None,
    quiet: Quiet = False,
    config_dir: ConfigDir = None,
    overrides: Overrides = None,
) -> None:
    """Train a ViT per scheme at task.resolution, then score it at other resolutions x methods.

    Tables are resampled with an interpolation mode, coordinate schemes extrapolate raw
    coordinates or interpolate them onto the trained grid. Writes table.csv/md (accuracy),
    long.csv, accuracy.png and, for schemes that add an embedding, similarity_<pe>.png and
    similarity.csv (the ViT paper's similarity figure and its rank correlation with grid distance).

    Example: posenc resolution --pe learned --interp bicubic --res 24,32,48,64
    """
    with user_errors():
        from posenc.engine.config import compose, options_where
        from posenc.engine.context import RunContext, main_table
        from posenc.engine.results import results_root
        from posenc.experiments.cache import TRAINED_AT
        from posenc.experiments.resolution import Resolution, run

        root = results_root(results_dir)  # a bad root stops here, before any work

        options = {
            "task": task,
            "train.steps": steps,
            "seed": seed,
            "resolution.finetune_steps": finetune_steps,
            "resolution.antialias": None if antialias is None else str(antialias).lower(),
        }
        if interp is not None:
            options["resolution.methods"] = "[" + ",".join(split_list(interp, "--interp")) + "]"
        if res is not None:
            options["resolution.resolutions"] = "[" + ",".join(map(str, split_list(res, "--res", int))) + "]"
        names = split_list(pe, "--pe") if pe is not None else options_where("pe", lambda c: c.ndim == 2)
        given = overrides_from(options, overrides)
        cfgs = [compose(["experiment=resolution", f"pe={name}", *given]) for name in names]
        with EventBar(quiet) as bar:
            ctx = RunContext(root, on_event=bar, overrides=given, device_name=str(cfgs[0].train.device), config=cfgs[0])
            result = run(cfgs, ctx)
    spec = main_table(Resolution)
    title = f"resolution: accuracy, trained at {cfgs[0].task.resolution} px"
    print_frame(result.table, [*spec.keys, *spec.pairs], title, facts=TRAINED_AT)
    console.print(f"run directory: {result.run.path}", highlight=False, soft_wrap=True)
