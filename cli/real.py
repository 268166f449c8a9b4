"""``posenc extrapolate --model FOLDER|FILE.gguf|HUB_ID``: the real-model options and progress."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from posenc.cli.common import console, err_console

Windows = Annotated[
    int, typer.Option(help="Real models: windows per length (window w starts at w x the longest length).")
]
Tail = Annotated[int, typer.Option(help="Real models: tail_ppl scores the last K predictions of each window.")]
Data = Annotated[
    str | None, typer.Option(help="Real models: a UTF-8 text file or a folder of them (default: built-in corpus).")
]
Dtype = Annotated[str, typer.Option(help="Real models: float32, bfloat16 or float16 weights (RoPE stays float32).")]
Device = Annotated[str, typer.Option(help="Real models: auto, cpu, cuda, cuda:N or mps (as train.device).")]
Passkey = Annotated[
    str | None,
    typer.Option(
        help="Real models: also passkey retrieval at these depths, percent comma list "
        "(e.g. 0,25,50,75,100); --windows trials."
    ),
]
Factor = Annotated[
    float | None, typer.Option(help="Real models: scaling factor (default: longest length / original context).")
]


def is_real_model(model: str | None) -> bool:
    """True when --model is not one of posenc's own model options."""
    from posenc.engine.config import list_options

    return model is not None and model not in list_options("model")


class ForwardBar:
    """A progress bar over the tokens of every forward pass, with an ETA (none when quiet)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.bar, self.task = quiet, None, None

    def __call__(self, event: dict[str, Any]) -> None:
        if self.quiet:
            return
        if event["event"] == "start":  # perplexity, then passkey: one bar each
            self.close()
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            if event["skipped"]:
                err_console.print(f"resuming: {event['skipped']} forward pass(es) already scored", highlight=False)
            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[n]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=err_console,
            )
            self.bar.__enter__()
            self.task = self.bar.add_task("loading", total=max(event["tokens"], 1), n=f"0/{event['forwards']}")
            self.total, self.done = event["forwards"], 0
        elif event["event"] == "forward":
            self.bar.update(self.task, description=event["label"])
        elif event["event"] == "done":
            self.done += 1
            self.bar.update(self.task, advance=event["tokens"], n=f"{self.done}/{self.total}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def run_real(
    model: str,
    scales: list[str],
    lengths: list[int] | None,
    windows: int,
    tail: int,
    data: str | None,
    dtype: str,
    device: str,
    factor: float | None,
    passkey: str | None,
    results_dir: Path | None,
    quiet: bool,
    finetune_steps: int = 0,
) -> None:
    from posenc.cli.extrapolate import print_table
    from posenc.core.text import split_list
    from posenc.engine.results import results_root
    from posenc.experiments.real import RealSettings, prepare, run

    settings = RealSettings(
        model=model,
        scales=scales,
        lengths=lengths or [2048, 4096],
        windows=windows,
        tail=tail,
        data=data,
        dtype=dtype,
        device=device,
        factor=factor,
        finetune_steps=finetune_steps,
        passkey_depths=None if passkey is None else split_list(passkey, "--passkey", float),
    )
    root = results_root(results_dir)
    prepared = prepare(settings)
    bar = ForwardBar(quiet)
    try:
        table, run_dir = run(settings, root, progress=bar, prepared=prepared)
    finally:
        bar.close()
    print_table(
        f"extrapolation: {prepared.source.name} (RoPE as shipped: {prepared.shipped}), original context "
        f"{prepared.original_length} tokens, {windows} window(s)",
        table,
    )
    if passkey is not None:
        import pandas as pd

        accuracy = pd.read_csv(run_dir.path / "passkey.csv")
        print_table(
            "passkey accuracy (length x depth)",
            accuracy.pivot_table(index=["scale", "depth"], columns="length", values="accuracy", sort=False)
            .reset_index()
            .rename(columns=str),
        )
    for name in prepared.finetuned:
        console.print(
            f"fine-tuned checkpoint ({name}): {run_dir.path / 'finetuned' / name}", highlight=False, soft_wrap=True
        )
    console.print(f"run directory: {run_dir.path}", highlight=False, soft_wrap=True)
