"""``posenc extrapolate --model FOLDER|FILE.gguf|HUB_ID``: a shortcut for ``experiment=real``.

It composes ``experiment=real model.path=PATH`` with the options given (``--scale`` sets
``real.scales``, ``--dtype`` sets ``model.dtype``, …) and the user's own overrides
(``real.tail=512``), then runs the protocol ``posenc sweep experiment=real`` runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from posenc.cli.common import EventBar, console

Windows = Annotated[
    int | None,
    typer.Option(help="Real models: windows per length (window w starts at w x the longest length). Default 1."),
]
Tail = Annotated[
    int | None, typer.Option(help="Real models: tail_ppl scores the last K predictions of each window. Default 1024.")
]
Data = Annotated[
    str | None, typer.Option(help="Real models: a UTF-8 text file or a folder of them (default: built-in corpus).")
]
Dtype = Annotated[
    str | None,
    typer.Option(help="Real models: float32, bfloat16 or float16 weights (RoPE stays float32). Default float32."),
]
Device = Annotated[str | None, typer.Option(help="Real models: auto, cpu, cuda, cuda:N or mps. Default auto.")]
Passkey = Annotated[
    str | None,
    typer.Option(
        help="Real models: also passkey retrieval at these depths, percent comma list "
        "(e.g. 0,25,50,75,100); real.passkey_trials=N trials per cell (default 20)."
    ),
]
Factor = Annotated[
    float | None, typer.Option(help="Real models: scaling factor (default: longest length / original context).")
]

# The options of posenc extrapolate that only a real model takes, and the config key each sets;
# and those that only posenc's own models take (--seed only where nothing is fine-tuned).
REAL_ONLY = {
    "windows": "real.windows",
    "tail": "real.tail",
    "data": "real.data",
    "dtype": "model.dtype",
    "device": "model.device",
    "factor": "real.factor",
    "passkey": "real.passkey_depths",
}
OWN_ONLY = ("pe", "steps")


def given(ctx: typer.Context, names: Any) -> list[str]:
    """The options among ``names`` that the command line (or the environment) set."""
    # by the source's name: typer ships its own copy of click, whose enum is not click's
    return [
        n for n in names if getattr(ctx.get_parameter_source(n), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")
    ]


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def is_real_model(model: str | None) -> bool:
    """True when --model is not one of posenc's own model options (or is a checkpoint option)."""
    from posenc.engine.config import list_options, option_class
    from posenc.experiments.real import Checkpoint

    return model is not None and (model not in list_options("model") or option_class("model", model) is Checkpoint)


def refuse_real_options(names: list[str]) -> None:
    """On posenc's own models: an option that only a real model takes is a mistake."""
    from posenc.core.errors import UserError

    if names:
        raise UserError(
            f"{flag(names[0])} applies to real models only (--model FOLDER|FILE.gguf|HUB_ID), "
            "not to posenc's own models"
        )


def _quoted(value: Any) -> str:
    """``value`` as a Hydra override value (a path or device may hold characters Hydra parses)."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'" if isinstance(value, str) else str(value)


def _items(values: list[Any]) -> str:
    return "[" + ",".join(_quoted(v) for v in values) + "]"


def real_options(ctx: typer.Context, **values: Any) -> dict[str, Any]:
    """The options given on the command line among ``values`` (by option name), parsed."""
    from posenc.core.text import split_list

    parse = {
        "scale": lambda v: split_list(v, "--scale"),
        "lengths": lambda v: split_list(v, "--lengths", int),
        "passkey": lambda v: split_list(v, "--passkey", float),
    }
    return {n: parse.get(n, lambda v: v)(values[n]) for n in given(ctx, values)}


def real_overrides(model: str, options: dict[str, Any]) -> list[str]:
    """``experiment=real``, the checkpoint, and an override for each option given."""
    from posenc.engine.config import list_options

    pick = f"model={model}" if model in list_options("model") else f"model.path={_quoted(model)}"
    keys = {
        **REAL_ONLY,
        "scale": "real.scales",
        "lengths": "real.lengths",
        "finetune_steps": "real.finetune_steps",
        "task": "task",  # a RULER prompt task (posenc list task), scored beside the perplexity
    }
    out = ["experiment=real", pick]
    for name, value in options.items():
        out.append(f"{keys[name]}={_items(value) if isinstance(value, list) else _quoted(value)}")
    return out


def run_real(
    model: str, options: dict[str, Any], overrides: list[str], ctx: typer.Context, results_dir: Path | None, quiet: bool
) -> None:
    """Compose and check the config, run ``experiment=real`` into the results root, print its tables."""
    from posenc.core.errors import UserError
    from posenc.engine.config import compose, instantiate
    from posenc.engine.context import RunContext
    from posenc.engine.results import results_root
    from posenc.experiments.real import check_overrides

    own_given = given(ctx, OWN_ONLY)
    if own_given:
        raise UserError(
            f"{flag(own_given[0])} applies to posenc's own models, not to the real model --model '{model}'"
            + ("; fine-tune it with --finetune-steps" if own_given[0] == "steps" else "")
        )
    check_overrides([*([f"task={options['task']}"] if "task" in options else []), *overrides])
    seed = [f"seed={ctx.params['seed']}"] if given(ctx, ["seed"]) else []
    composed = [*real_overrides(model, options), *seed, *overrides]
    cfg = compose(composed)
    seeded = any(o.lstrip("+~").split("=")[0] == "seed" for o in [*seed, *overrides])
    if seeded and not cfg.real.finetune_steps and not is_prompt_task(cfg):
        raise UserError(
            f"--seed is unused: the real model --model '{model}' is scored deterministically; "
            "it draws random numbers only to fine-tune (--finetune-steps) and for a RULER task's prompts (--task)"
        )
    protocol = instantiate(cfg.protocol, "protocol")
    protocol.check(cfg)
    root = results_root(results_dir)
    with EventBar(quiet) as bar:
        result = protocol.run(cfg, RunContext(root, on_event=bar, overrides=composed, config=cfg))
    print_result(result)


def is_prompt_task(cfg: Any) -> bool:
    """Whether ``task=…`` picks a RULER prompt task, whose prompts the seed draws."""
    from posenc.experiments.real_ruler import chosen_task

    return chosen_task(cfg) is not None


def print_result(result: Any) -> None:
    """The perplexity table under its title, the passkey and RULER pivots, and the paths written."""
    from posenc.cli.extrapolate import print_table

    config, summary = result.run.read_config(), result.run.read_summary()
    print_table(
        f"extrapolation: {config['model']['name']} (RoPE as shipped: {config['shipped_rope']}), original context "
        f"{config['original_length']} tokens, {config['real']['windows']} window(s)",
        result.tables["table"],
    )
    if "passkey" in result.tables:
        accuracy = result.tables["passkey"]
        print_table(
            "passkey accuracy (length x depth)",
            accuracy.pivot_table(index=["scale", "depth"], columns="length", values="accuracy", sort=False)
            .reset_index()
            .rename(columns=str),
        )
    if "ruler" in result.tables:
        from posenc.experiments.real_ruler import labelled_depths

        ruler = labelled_depths(result.tables["ruler"])  # a task without a needle depth: each trial's own
        print_table(
            f"{config['task']['name']}: string_match_all (length x depth); ruler.csv has the exact-match-all rate",
            ruler.pivot_table(index=["scale", "depth"], columns="length", values="score", sort=False)
            .reset_index()
            .rename(columns=str),
        )
    for name, folder in summary.get("finetuned", {}).items():
        console.print(f"fine-tuned checkpoint ({name}): {folder}", highlight=False, soft_wrap=True)
    console.print(f"run directory: {result.run.path}", highlight=False, soft_wrap=True)
