"""RULER's synthetic tasks on a real model (``experiment=real task=ruler_vt``; ``posenc extrapolate
--model PATH --task ruler_vt``): the part of the real-model protocol (``posenc.experiments.real``)
that reads a prompt task.

A prompt task (``posenc.tasks.ruler``, a class that says ``trains = False``) is generated from its
seed on the model's own tokenizer at every ``real.lengths`` and, for a task with a needle, every
depth of ``task.depths``: ``task.trials`` prompts a cell, the same in every scale. Each trial is
read by greedy decoding (the prompt without its reference answer; at most the task's
``max_new_tokens``, RULER's ``tokens_to_generate``, or the reference answer's tokens + 4 where a
tokenizer spells it longer; stopped early once every answer is in the text, which no later token
can change, or at EOS) and scored as RULER scores it: ``string_match_all``, the fraction of the
expected values in the output, and whether all of them are (the exact-match-all rate). A trial's
record (its answers, the decoded text and tokens, the score) is a cell of the run's store, keyed
by the task's settings less those that only add cells (trials, depths); the run folder holds
``ruler_prompts.jsonl``, every prompt's text and answers.

A length too short for a trial's prompt with the fewest haystack units is refused at ``check``
in one line naming the shortest length that fits every trial, before any weight is read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig, OmegaConf

from posenc.analysis.stats import wilson_interval
from posenc.core.errors import ConfigError
from posenc.core.io import atomic_write_text
from posenc.engine.config import compose_defaults, instantiate, options_where, target_class
from posenc.engine.results import config_hash
from posenc.tasks.ruler.base import RulerPrompt, RulerTask

# the prefix of every RULER cell's key: a change of prompt or verdict gets a new one
RULER_CELLS = "ruler-v1"
# task settings that add cells without changing a finished one (cells are keyed by trial and depth)
GROWABLE = ("description", "trials", "depths")


@dataclass(frozen=True)
class Chosen:
    """The prompt task of a run: its option ``name``, the ``task`` and its resolved config ``node``."""

    name: str
    task: RulerTask
    node: dict[str, Any]

    @property
    def cells(self) -> str:
        """The store's folder of this task's cells: its name and the hash of what its prompts depend on."""
        prompts = {k: v for k, v in self.node.items() if k not in GROWABLE}
        return f"{RULER_CELLS}/{self.name}-{config_hash(prompts)[:12]}"


def prompt_tasks() -> list[str]:
    """The task options a real model is scored on: the classes that say they do not train."""
    return options_where("task", lambda cls: not getattr(cls, "trains", True))


def chosen_task(cfg: DictConfig) -> Chosen | None:
    """The prompt task ``task=…`` picks; None for the tree's default task (the real protocol reads
    ``real.data`` for perplexity, not a task); another of posenc's own tasks is a ``ConfigError``."""
    if cfg.get("task") is None:
        return None
    name = str(cfg.choices.get("task"))
    if getattr(target_class(cfg.task, "task"), "trains", True):
        if name == compose_defaults().choices.task:
            return None
        raise ConfigError(
            f"task '{name}' trains posenc's own models; a real model is scored on the prompt tasks: "
            f"{', '.join(prompt_tasks())} (its passkey: real.passkey_depths)"
        )
    node = OmegaConf.to_container(cfg.task, resolve=True)
    return Chosen(name, instantiate(cfg.task, "task"), node)


def check_fits(chosen: Chosen, tokenizer: Any, lengths: Sequence[int]) -> None:
    """Every trial's prompt fits the shortest of ``lengths``, else one line naming the shortest that does."""
    shortest = chosen.task.shortest(tokenizer)
    if min(lengths) < shortest:
        raise ConfigError(
            f"real.lengths {min(lengths)} is too short for task {chosen.name} on this model's tokenizer: "
            f"the shortest length that fits its prompts (answer included) is {shortest} tokens"
        )


def ruler_cell(chosen: Chosen, scale: str, length: int, depth: float | None, trial: int) -> str:
    return f"{chosen.cells}/{scale}/{length}/{'own' if depth is None else depth}/{trial}"


def ruler_plan(chosen: Chosen | None, scales: Sequence[str], lengths: Sequence[int]) -> list[tuple[tuple, str]]:
    """((scale, length, depth, trial), cell key) of every trial asked for, trial by trial (a run
    cut short has as many trials in every cell, to one)."""
    if chosen is None:
        return []
    return [
        ((scale, n, d, t), ruler_cell(chosen, scale, n, d, t))
        for t in range(chosen.task.trials)
        for scale in scales
        for n in lengths
        for d in chosen.task.grid()
    ]


def prompts_of(chosen: Chosen, tokenizer: Any, plan: Sequence[tuple[tuple, str]]) -> dict[tuple, RulerPrompt]:
    """Each (length, depth, trial) of the plan's prompt, made once for every scale."""
    out: dict[tuple, RulerPrompt] = {}
    for (_, n, d, t), _ in plan:
        if (n, d, t) not in out:
            out[n, d, t] = chosen.task.prompt(tokenizer, n, t, d)
    return out


def decode_limit(task: RulerTask, prompt: RulerPrompt) -> int:
    return max(task.max_new_tokens, len(prompt.answer_ids) + 4)


def score_ruler(
    model: Any,
    todo: Sequence[tuple[tuple, str]],
    chosen: Chosen,
    prompts: dict[tuple, RulerPrompt],
    p: Any,
    done: dict[str, dict[str, Any]],
    cells: Any,
    ctx: Any,
) -> None:
    """Each trial read by greedy decoding (``Model.greedy_decode``) and scored by the task's
    ``string_match_all``; its record goes to the store once scored."""
    tokenizer, eos = p.tokenizer, p.tokenizer.eos_token_id
    ctx.emit("stage", chosen.name, total=sum(c[1] for c, _ in todo))
    tokens = 0
    for i, ((scale, n, depth, trial), key) in enumerate(todo):
        where = "" if depth is None else f", depth {depth:g}"
        ctx.emit("advance", f"{chosen.name} {scale} @ {n}{where}", done=tokens, info=f"{i}/{len(todo)}")
        start = time.perf_counter()
        prompt = prompts[n, depth, trial]

        def answered(out: list[int], answers: list[str] = prompt.answers) -> bool:
            return out[-1] == eos or chosen.task.score(tokenizer.decode(out), answers) == 1.0

        ids = torch.tensor(prompt.ids + prompt.answer_ids, dtype=torch.long)
        limit = decode_limit(chosen.task, prompt)
        out, forwards = model.greedy_decode(p.scales[scale], ids, len(prompt.answer_ids), answered, limit)
        decoded = tokenizer.decode(out)
        value = chosen.task.score(decoded, prompt.answers)
        done[key] = {
            "key": key,
            "task": chosen.name,
            "scale": scale,
            "length": n,
            "depth": depth,
            "trial": trial,
            "needle_depth": prompt.depth,
            "tokens": len(prompt.ids),
            "units": prompt.units,
            "answers": prompt.answers,
            "decoded": decoded,
            "decoded_ids": out,
            "score": value,
            "all_found": value == 1.0,
            "forwards": forwards,
            "seconds": time.perf_counter() - start,
        }
        cells.add(done[key])
        tokens += n
        ctx.emit("advance", done=tokens, info=f"{i + 1}/{len(todo)}")


TRIAL_COLUMNS = [
    "task",
    "scale",
    "length",
    "depth",
    "trial",
    "needle_depth",
    "tokens",
    "answers",
    "decoded",
    "score",
    "all_found",
    "forwards",
    "seconds",
]


def ruler_trials(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Every trial: the answers expected and what greedy decoding wrote (JSON strings, so that
    whitespace shows and the CSV keeps one line per trial), its score and wall time."""
    out = pd.DataFrame(records, columns=TRIAL_COLUMNS)
    out["answers"] = [json.dumps(a, ensure_ascii=False) for a in out.answers]
    out["decoded"] = [json.dumps(text, ensure_ascii=False) for text in out.decoded]
    return out


def ruler_table(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """By scale, length and depth (NaN: each trial its own): the mean ``string_match_all``, the
    exact-match-all rate with its 95% Wilson interval, trials, mean prompt tokens, wall time."""
    rows = []
    frame = pd.DataFrame(records)
    for (task, scale, n, depth), part in frame.groupby(["task", "scale", "length", "depth"], sort=False, dropna=False):
        found, trials = int(part.all_found.sum()), len(part)
        low, high = wilson_interval(found, trials)
        rows.append(
            {
                "task": task,
                "scale": scale,
                "length": n,
                "depth": depth,
                "score": float(part.score.mean()),
                "all_found": found / trials,
                "ci95_low": low,
                "ci95_high": high,
                "found": found,
                "trials": trials,
                "tokens": float(part.tokens.mean()),
                "seconds": float(part.seconds.sum()),
            }
        )
    return pd.DataFrame(rows)


def write_prompts(path: Path, prompts: dict[tuple, RulerPrompt]) -> None:
    """``ruler_prompts.jsonl``: each (length, depth, trial)'s prompt text, answers and token count."""
    lines = [
        json.dumps(
            {
                "length": n,
                "depth": d,
                "trial": t,
                "needle_depth": p.depth,
                "tokens": len(p.ids),
                "units": p.units,
                "answers": p.answers,
                "text": p.text,
            },
            ensure_ascii=False,
        )
        + "\n"
        for (n, d, t), p in prompts.items()
    ]
    atomic_write_text(path, "".join(lines))


def labelled_depths(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with a missing depth (a task whose trials place their needles themselves) read ``own``."""
    depth = table.depth.astype(object)
    return table.assign(depth=depth.where(table.depth.notna(), "own"))
