"""``posenc bench``: speed and memory against the reference implementations."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated

import typer

from posenc.cli.common import console, fail, user_errors


def bench(
    only: Annotated[
        str | None, typer.Option(help="Comma list of cases (default: all; a wrong name lists the valid ones).")
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Tiny sizes and short timings: checks the harness only.")
    ] = False,
    threads: Annotated[int, typer.Option(help="torch threads for every measurement.")] = 2,
    clock: Annotated[
        str,
        typer.Option(
            help="Clock of the training-throughput blocks: wall, or cpu (this process's "
            "CPU time, for a machine shared with other jobs; use with --threads 1)."
        ),
    ] = "wall",
    out: Annotated[Path, typer.Option(help="Folder for bench.csv, bench.md and environment.json.")] = Path(
        "results/bench"
    ),
    real_lengths: Annotated[
        str | None,
        typer.Option(
            help="Lengths of the `real` case, comma list (default 4096; 16384 takes minutes per forward on a CPU)."
        ),
    ] = None,
    real_model: Annotated[
        str | None,
        typer.Option(
            help="The `real` case's model: a checkpoint folder or .gguf file "
            "(default: a random Llama of SmolLM2-135M's shapes)."
        ),
    ] = None,
) -> None:
    """Benchmark posenc against transformers (training step, RoPE, a real Llama's forward) and its
    own baselines (schemes vs NoPE, long-context evaluation), and the CLI start-up time.

    Example: posenc bench --only rope,cli; posenc bench --only real --real-lengths 4096,16384
    """
    import pandas as pd
    import torch
    from rich.table import Table

    from posenc.benchmarks.suite import CASES, Sizes, environment
    from posenc.core.io import write_json, write_table

    names = [n.strip() for n in (only or ",".join(CASES)).split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown or not names:
        raise fail(f"unknown benchmark '{','.join(unknown)}'; valid: {', '.join(CASES)}")
    if threads < 1:
        raise fail(f"--threads must be >= 1, got {threads}")
    if clock not in ("wall", "cpu"):
        raise fail(f"unknown clock '{clock}'; valid: wall, cpu")
    lengths = _lengths(real_lengths) if real_lengths else None
    if real_model is not None:
        from posenc.models import pretrained

        with user_errors():  # a bad model stops here, before any case runs
            pretrained.read_config(pretrained.resolve_source(real_model))
    torch.set_num_threads(threads)
    sizes = dataclasses.replace(Sizes.quick() if quick else Sizes(), cpu_clock=clock == "cpu", real_model=real_model)
    if lengths:
        sizes = dataclasses.replace(sizes, real_lengths=lengths)
    rows = [r for name in names for r in CASES[name](sizes, threads)]
    env = environment(threads)
    # each row names the CPU it was measured on (the ratios depend on it; see ``environment``)
    table = pd.DataFrame(rows).assign(cpu=env["cpu"])
    write_table(table, out, "bench")
    write_json(out / "environment.json", {**env, "quick": quick, "clock": clock})

    view = Table(
        title=f"posenc bench ({env['cpu']}, {env['cpu_capability']}, {threads} threads, {clock} clock, "
        f"torch {torch.__version__})"
    )
    for column in ("benchmark", "case", "posenc", "reference", "unit", "ratio", "goal", "met"):
        view.add_column(column, justify="right" if column in ("posenc", "reference", "ratio") else "left")
    for r in rows:
        ratio = f"{r['ratio']:.3f}"
        if not math.isnan(r.get("ratio_low", math.nan)):  # an interval (NaN when too few rounds)
            ratio += f" [{r['ratio_low']:.3f}, {r['ratio_high']:.3f}]"
        view.add_row(
            r["benchmark"],
            r["case"],
            f"{r['posenc']:.4g}",
            f"{r['reference']:.4g}",
            r["unit"],
            ratio,
            r["goal"],
            "yes" if r["met"] else "NO",
        )
    console.print(view)
    console.print(f"written: {out / 'bench.csv'}, {out / 'bench.md'}", highlight=False)


def _lengths(text: str) -> tuple[int, ...]:
    try:
        lengths = tuple(int(n) for n in text.split(","))
    except ValueError:
        raise fail(f"--real-lengths must be a comma list of integers, got '{text}'") from None
    if min(lengths) < 2:
        raise fail(f"--real-lengths must be >= 2 tokens each, got '{text}'")
    return lengths


def main() -> None:
    typer.run(bench)
