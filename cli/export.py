"""``posenc export``: a real model with a scaling, saved as a Hugging Face folder, and llama.cpp's flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from posenc.cli.common import ConfigDir, console, user_errors
from posenc.cli.completion import options_of


def export(
    model: Annotated[
        str,
        typer.Option(
            help="The real model: a Hugging Face folder, a .gguf file, a hub id, or the run folder of "
            "`posenc extrapolate --model ... --finetune-steps N` (its fine-tuned copy)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The folder to write (absent or empty).")],
    scale: Annotated[
        str,
        typer.Option(
            help="The rescaling (see `posenc list scale`); none exports the model's own RoPE.",
            autocompletion=options_of("scale"),
        ),
    ] = "none",
    remap: Annotated[
        str,
        typer.Option(
            help="A position remap (see `posenc list remap`): refused, no Hugging Face config carries one.",
            autocompletion=options_of("remap"),
        ),
    ] = "none",
    factor: Annotated[
        float | None,
        typer.Option(help="Scaling factor: the context becomes factor x the original (pi, ntk, yarn, ...)."),
    ] = None,
    scaled_layers: Annotated[
        str | None,
        typer.Option(
            help="The layer type the scaling acts on, where each has its own RoPE (Gemma 3: default full_attention)."
        ),
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="float32, bfloat16 or float16 weights. Default: the checkpoint's own.")
    ] = None,
    finetuned: Annotated[
        str | None, typer.Option(help="With a run folder holding several fine-tuned copies: which (e.g. yarn+ft100).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace --out when it exists and is not empty.")] = False,
    config_dir: ConfigDir = None,
) -> None:
    """Save a real model with a scaling as a Hugging Face folder whose config.json carries it, and
    print the llama.cpp flags that give the same RoPE.

    Example: posenc export --model SmolLM2.gguf --scale yarn --factor 4 --out smollm2-yarn4

    A fine-tuned copy already carries its scaling: posenc export --model RUN_FOLDER --out tuned
    """
    del config_dir  # its callback put the user's config folder on the search path
    with user_errors():
        from posenc.core.errors import UserError
        from posenc.experiments.real import build_scale, rope_scale_names
        from posenc.models import export as library
        from posenc.models import pretrained

        if scale not in rope_scale_names():
            raise UserError(
                f"--scale '{scale}' does not rescale a real model's RoPE; valid: {', '.join(rope_scale_names())}"
            )
        refuse_remap(remap)
        weights = pretrained.check_dtype(dtype) if dtype is not None else None
        source = pretrained.resolve_source(finetuned_copy(model, finetuned))
        config = pretrained.read_config(source)
        built = build_scale(scale, pretrained.original_context(config), factor)
        plan = library.plan_export(source, config, built, scale, out, factor, force, scaled_layers)
        folder = library.write_export(plan, weights)
    first = {"rope_type": None, "rope_theta": None}  # then the scaling's parameters
    rope = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in {**first, **plan.rope}.items())
    layers = f", {plan.layer_type} layers" if plan.layer_type else ""
    console.print(
        f"exported: {folder} (config.json{layers}: {rope}; context {plan.length} tokens)",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"llama.cpp: {plan.llama_cpp.line()}", highlight=False, soft_wrap=True)


def finetuned_copy(model: str, name: str | None) -> str:
    """``--model`` itself, or, for a run folder of a real model fine-tuned by ``posenc
    extrapolate``, the folder of its fine-tuned copy ``name`` (the only one when not named)."""
    from posenc.core.errors import UserError
    from posenc.engine.results import RunDir

    path = Path(model).expanduser()
    if not (path / "summary.json").is_file() or (path / "config.json").is_file():
        if name is not None:
            raise UserError(f"--finetuned names a fine-tuned copy of a run folder; --model '{model}' is not one")
        return model
    copies = RunDir.open(path).read_summary().get("finetuned") or {}
    if not copies:
        raise UserError(f"--model '{model}' is a run folder without a fine-tuned copy (see --finetune-steps)")
    if name is None and len(copies) > 1:
        raise UserError(f"--model '{model}' holds fine-tuned copies {', '.join(copies)}; name one with --finetuned")
    name = name or next(iter(copies))
    if name not in copies:
        raise UserError(f"--finetuned '{name}' is not in --model '{model}'; valid: {', '.join(copies)}")
    return copies[name]


def refuse_remap(name: str) -> None:
    """A position remap changes which positions attention rotates queries and keys to, which no
    Hugging Face config says: any but ``none`` is refused, an unknown one too."""
    from posenc.core.errors import UserError
    from posenc.engine.config import list_options

    valid = list(list_options("remap"))
    if name not in valid:
        raise UserError(f"--remap '{name}' is not a remap; valid: {', '.join(valid)}")
    if name != "none":
        raise UserError(
            f"--remap {name}: transformers has no position remap, so no Hugging Face folder can carry it; "
            "export the scaling alone (--remap none)"
        )
