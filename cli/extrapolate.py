"""``posenc extrapolate``: train at one length, evaluate at longer ones under each rescaling."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

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
    user_errors,
)
from posenc.cli.completion import options_of
from posenc.cli.real import (
    REAL_ONLY,
    Data,
    Device,
    Dtype,
    Factor,
    Passkey,
    Tail,
    Windows,
    given,
    is_real_model,
    real_options,
    refuse_real_options,
    run_real,
)


def _names(value: str | None, option: str) -> list[str]:
    from posenc.core.text import split_list

    return split_list(value or "", option)


def _lengths(value: str | None) -> list[int] | None:
    from posenc.core.text import split_list

    return None if value is None else split_list(value, "--lengths", int)


def print_table(title: str, table: Any, keys: Sequence[str] | None = None, train_len: int | None = None) -> None:
    """The table at the terminal's width (``print_frame``; ``keys``: the columns each row is named
    by, default its text columns): how each model trained in a second table, and one line naming
    the evaluated lengths below ``train_len``."""
    from posenc.cli.common import print_frame
    from posenc.experiments.cache import TRAINED_AT

    keys = [c for c in table.columns if table[c].dtype == object] if keys is None else list(keys)
    below = [c for c in map(str, table.columns) if c.isdigit() and train_len is not None and int(c) < train_len]
    notes = [f"evaluated below the training length ({train_len} tokens): {', '.join(below)}"] if below else []
    print_frame(table, keys, title, facts=TRAINED_AT, notes=notes)


def extrapolate(
    ctx: typer.Context,
    pe: Annotated[
        str, typer.Option(help="Position schemes, comma list (see `posenc list pe`).", autocompletion=options_of("pe"))
    ] = "rope",
    scale: Annotated[
        str,
        typer.Option(
            help="Rescalings, comma list, or `all` (see `posenc list scale`).",
            autocompletion=options_of("scale", ("all",)),
        ),
    ] = "none",
    remap: Annotated[
        str | None,
        typer.Option(
            help="A position remap on the scored model, on top of each scale (see `posenc list remap`); "
            "its settings as remap.KEY=VALUE overrides.",
            autocompletion=options_of("remap"),
        ),
    ] = None,
    lengths: Annotated[
        str | None, typer.Option(help="Evaluated lengths, comma list. Default: train length x 1,2,4,8,16.")
    ] = None,
    task: Annotated[
        str | None, typer.Option(help="Task option (see `posenc list task`).", autocompletion=options_of("task"))
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model option (see `posenc list model`), or a real model: a Hugging Face "
            "folder, a .gguf file or a hub id.",
            autocompletion=options_of("model"),
        ),
    ] = None,
    finetune_steps: Annotated[
        int,
        typer.Option(
            help="Also fine-tune N steps at each length with the scaling applied (a real model: at the "
            "longest length, saved as a Hugging Face checkpoint)."
        ),
    ] = 0,
    steps: Steps = None,
    seed: Seed = None,
    results_dir: ResultsDir = None,
    quiet: Quiet = False,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Continue the interrupted run in this directory: its models from the cache, the cells it "
            "scored from its cells.jsonl. Without other options it keeps the run's own config; with them, "
            "they must give the same config."
        ),
    ] = None,
    config_dir: ConfigDir = None,
    windows: Windows = None,
    tail: Tail = None,
    data: Data = None,
    dtype: Dtype = None,
    device: Device = None,
    factor: Factor = None,
    passkey: Passkey = None,
    overrides: Overrides = None,
) -> None:
    """Train at train.seq_len (or reuse the cached model), evaluate at longer lengths per scale.

    Example: posenc extrapolate --pe rope,alibi,nope --scale none,pi,ntk,yarn --lengths 128,512,2048

    Real model: posenc extrapolate --model FOLDER|FILE.gguf|HUB_ID --scale pi,yarn --lengths 4096,16384

    Remap: posenc extrapolate --pe rope --scale none,yarn --remap self_extend remap.group=4 remap.window=32
    """
    if is_real_model(model):
        with user_errors():
            if resume is not None:
                from posenc.core.errors import UserError

                raise UserError(
                    "--resume is for posenc's own models; run a real model's command again: "
                    "it scores only the cells its store lacks"
                )
            options = real_options(
                ctx,
                scale=scale,
                lengths=lengths,
                finetune_steps=finetune_steps,
                windows=windows,
                tail=tail,
                data=data,
                dtype=dtype,
                device=device,
                factor=factor,
                passkey=passkey,
                task=task,
            )
            remapped = [f"remap={remap}"] if remap is not None else []
            return run_real(model, options, [*remapped, *(overrides or [])], ctx, results_dir, quiet)
    with user_errors():
        refuse_real_options(given(ctx, REAL_ONLY))  # before any work of posenc's own models
    with user_errors():
        from posenc.engine.context import RunContext, main_table
        from posenc.engine.results import results_root
        from posenc.experiments.extrapolation.plan import plan
        from posenc.experiments.extrapolation.protocol import Extrapolation, resumed
        from posenc.experiments.extrapolation.protocol import extrapolate as run_cells

        # a bad root stops here, before any work; a resumed run's models are in its own root's cache
        root = results_root(results_dir if results_dir or resume is None else resume.absolute().parents[1])

        base = overrides_from(
            {"model": model, "task": task, "train.steps": steps, "seed": seed, "remap": remap}, overrides
        )
        if resume is not None and not base and not given(ctx, ("pe", "scale", "lengths", "finetune_steps")):
            cfgs, settings = resumed(resume)  # the run's own cells and settings
        else:
            cfgs = plan(_names(pe, "--pe"), _names(scale, "--scale"), base)
            if remap not in (None, "none"):  # the model as trained beside the remapped cells, as none beside a scale
                plain = [o for o in base if o.lstrip("+~").split("=")[0].split(".")[0] != "remap"]
                cfgs = plan(_names(pe, "--pe"), ["none"], plain) + cfgs
            settings = {"lengths": _lengths(lengths), "finetune_steps": finetune_steps}
        with EventBar(quiet) as bar:
            context = RunContext(root, resume=resume, on_event=bar, overrides=base, config=cfgs[0])
            result = run_cells(cfgs, context, **settings)
    title = f"extrapolation: {cfgs[0].choices.task}, trained at {cfgs[0].train.seq_len} tokens"
    spec = main_table(Extrapolation)
    print_table(title, result.table, [*spec.keys, *spec.pairs], train_len=cfgs[0].train.seq_len)
    console.print(f"run directory: {result.run.path}", highlight=False, soft_wrap=True)
