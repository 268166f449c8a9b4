"""``posenc export``: a real model with a scaling, saved as a Hugging Face folder, and llama.cpp's flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from posenc.cli.common import ConfigDir, console, user_errors
from posenc.cli.completion import options_of
from posenc.cli.real import Factor


def export(
    model: Annotated[
        str,
        typer.Option(
            help="The real model: a Hugging Face folder (a fine-tuned copy posenc saved too), a .gguf file or a hub id."
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
    factor: Factor = None,
    scaled_layers: Annotated[
        str | None,
        typer.Option(
            help="The layer type the scaling acts on, where each has its own RoPE (Gemma 3: default full_attention)."
        ),
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="float32, bfloat16 or float16 weights. Default: the checkpoint's own.")
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace --out when it exists and is not empty.")] = False,
    config_dir: ConfigDir = None,
) -> None:
    """Save a real model with a scaling as a Hugging Face folder whose config.json carries it, and
    print the llama.cpp flags that give the same RoPE.

    Example: posenc export --model SmolLM2.gguf --scale yarn --factor 4 --out smollm2-yarn4
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
        weights = pretrained.check_dtype(dtype) if dtype is not None else None
        source = pretrained.resolve_source(model)
        config = pretrained.read_config(source)
        built = build_scale(scale, pretrained.original_context(config), factor)
        plan = library.plan_export(source, config, built, scale, out, factor, force, scaled_layers)
        folder = library.write_export(plan, weights)
    rope = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in plan.rope.items())
    console.print(
        f"exported: {folder} (config.json: {rope}; context {plan.length} tokens)", highlight=False, soft_wrap=True
    )
    console.print(f"llama.cpp: {plan.llama_cpp.line()}", highlight=False, soft_wrap=True)
