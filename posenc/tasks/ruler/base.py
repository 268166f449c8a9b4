"""RULER's synthetic long-context tasks (Hsieh et al. 2024, arXiv 2404.06654; NVIDIA/RULER's
``scripts/data/synthetic``), generated offline on a model's own tokenizer and scored as RULER
scores them.

A task turns a trial seed into a ``RulerPrompt``: the prompt text (context, question and the
answer's lead-in), its token ids, and the answer strings. A task builds its context from a count
of haystack units (filler sentences, corpus sentences, distractor pairs, words) and fits it to a
token budget: the most units whose prompt, with the reference answer after it, stays within
``length`` tokens. Everything random is drawn from the seed before the count is chosen, so the
needles and the question do not depend on the length; a unit's position (a needle's depth)
is a fraction of the count.

Scoring (RULER's ``scripts/eval/synthetic/constants.py``): an answer string counts when it occurs
in the output, ignoring case; ``string_match_all`` is the fraction of a trial's answers found (the
retrieval, tracing and aggregation tasks), ``string_match_part`` whether any is (its QA tasks).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import ClassVar, Protocol

from posenc.core.errors import ConfigError
from posenc.tasks.base import stream_seed

# a trial's prompt: build(n) is its text with n haystack units, and its answers
Builder = Callable[[int], tuple[str, list[str]]]


class Tokenizer(Protocol):
    """What a generator needs of a tokenizer: Hugging Face's ``encode``/``decode`` signature."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class ByteTokenizer:
    """UTF-8 bytes as tokens (vocabulary 256): the tokenizer of posenc's byte-level LMs."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode())

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(ids).decode(errors="replace")


def text_start(tokenizer: Tokenizer) -> list[int]:
    """The special tokens the tokenizer puts before every text it encodes, as the model saw its
    training text begin: Gemma's ``<bos>``; none for SmolLM2's or the byte tokenizer. Read from
    the tokenizer itself (with and without its special tokens), so a model is scored on input
    shaped as the model's own tokenizer shapes it."""
    bare = tokenizer.encode("a", add_special_tokens=False)
    full = tokenizer.encode("a", add_special_tokens=True)
    lead = len(full) - len(bare)
    return list(full[:lead]) if lead > 0 and list(full[lead:]) == list(bare) else []


@dataclass(frozen=True)
class RulerPrompt:
    """One trial: ``text`` (the prompt, ending in the answer's lead-in) and its ``ids`` (after
    the tokenizer's ``text_start``); the ``answers`` a right output contains; ``answer_ids``, the
    reference answer's tokens (the budget holds them); ``depth``, where the needle sits in the
    context (0: first, 1: last), for a task with one needle; ``units``, how many haystack units fit."""

    text: str
    ids: list[int]
    answers: list[str]
    answer_ids: list[int]
    depth: float | None
    units: int

    def __len__(self) -> int:
        return len(self.ids) + len(self.answer_ids)


def string_match_all(output: str, answers: Sequence[str]) -> float:
    """The fraction of ``answers`` that occur in ``output``, ignoring case (RULER's niah,
    variable tracking, common- and frequent-words score)."""
    text = output.lower()
    return sum(a.lower() in text for a in answers) / len(answers)


def string_match_part(output: str, answers: Sequence[str]) -> float:
    """1 when any of ``answers`` occurs in ``output``, ignoring case, else 0 (RULER's QA score)."""
    text = output.lower()
    return float(any(a.lower() in text for a in answers))


def trial_rng(*key: object) -> random.Random:
    """A generator of its own for a key (task, seed, trial, part)."""
    return random.Random(stream_seed(*key))


@cache
def corpus_sentences() -> tuple[str, ...]:
    """The built-in corpus (``posenc.tasks.text.builtin_documents``) as sentences: runs of
    whitespace joined, cut after a full stop, question or exclamation mark before a capital."""
    from posenc.tasks.text import builtin_documents

    text = " ".join(" ".join(doc.split()) for doc in builtin_documents())
    return tuple(s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text) if len(s.split()) >= 3)


@cache
def corpus_words() -> tuple[str, ...]:
    """The distinct lower-case alphabetic words of four to ten letters in the built-in corpus, sorted."""
    from posenc.tasks.text import builtin_documents

    return tuple(sorted({w for doc in builtin_documents() for w in re.findall(r"\b[a-z]{4,10}\b", doc)}))


def coded_words(rng: random.Random, n: int, letters: int = 6, exclude: frozenset[str] = frozenset()) -> list[str]:
    """``n`` distinct random lower-case words of ``letters`` letters, none in ``exclude``."""
    out: dict[str, None] = {}
    while len(out) < n:
        w = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=letters))
        if w not in exclude:
            out[w] = None
    return list(out)


def measure(build: Builder, tokenizer: Tokenizer, n: int) -> tuple[int, str, list[str], list[int], list[int]]:
    """The prompt ``build(n)`` with ``n`` haystack units: (its tokens with the reference answer,
    text, answers, prompt ids, answer ids)."""
    text, answers = build(n)
    ids = text_start(tokenizer) + tokenizer.encode(text, add_special_tokens=False)
    answer_ids = tokenizer.encode(reference_answer(answers), add_special_tokens=False)
    return len(ids) + len(answer_ids), text, answers, ids, answer_ids


def fit_units(
    build: Builder,
    tokenizer: Tokenizer,
    length: int,
    least: int,
    name: str,
) -> tuple[int, str, list[str], list[int], list[int]]:
    """The most haystack units ``n >= least`` whose prompt ``build(n)`` (text, answers) and
    reference answer fit ``length`` tokens: (n, text, answers, prompt ids, answer ids). A length
    that cannot hold ``least`` units: ``ConfigError`` naming the shortest that can."""
    first = measure(build, tokenizer, least)
    if first[0] > length:
        raise ConfigError(
            f"length {length} is too short for the RULER task {name} on this tokenizer; "
            f"the shortest prompt that fits takes {first[0]} tokens"
        )
    lo, hi = least, least + 1  # lo fits; grow hi until it does not
    while measure(build, tokenizer, hi)[0] <= length:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # the token count grows with the units (monotone up to a merge at a seam)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if measure(build, tokenizer, mid)[0] <= length else (lo, mid)
    _, text, answers, ids, answer_ids = measure(build, tokenizer, lo)
    return lo, text, answers, ids, answer_ids


def reference_answer(answers: Sequence[str]) -> str:
    """The answer an LM is taught and the budget holds: the answers after a space, comma-separated."""
    return " " + ", ".join(answers) + "."


def insert_at(units: list[str], items: Sequence[str], fractions: Sequence[float]) -> list[str]:
    """``units`` with ``items[i]`` inserted before unit round(fractions[i] · len(units)) (a
    fraction 1 puts it after the last); items at the same place keep their order."""
    n = len(units)
    slots = sorted(((round(f * n), i) for i, f in enumerate(fractions)))
    out, last = [], 0
    for pos, i in slots:
        out += units[last:pos] + [items[i]]
        last = pos
    return out + units[last:]


class RulerTask:
    """Base of the prompt tasks: ``prompt(tokenizer, length, trial)`` is a subclass's ``build``
    fitted to the budget. A subclass sets ``name``, ``least`` (the units the shortest prompt
    holds) and ``draw``/``build``; one with a needle sets ``has_depth`` and may take ``depths``.

    A prompt task is text for a pretrained model's own tokenizer, scored by ``experiment=real``
    (``posenc extrapolate --model PATH --task ruler_vt``): nothing trains on it (``trains``), and
    posenc's own LMs take the token versions (``posenc.tasks.ruler.tokens``)."""

    name: str
    least: int = 1
    has_depth: bool = False
    trains: ClassVar[bool] = False  # as a pretrained checkpoint: scored, never trained on
    input_kind: ClassVar[str] = "text"  # what a model reads of it: text, for the model's own tokenizer
    order_labels: ClassVar[bool] = False  # not an order task (posenc order reads the fact of every task)
    # the tokens greedy decoding may write after a prompt (RULER's tokens_to_generate,
    # scripts/data/synthetic/constants.py: niah 128, vt 30, cwe 120, fwe 50)
    max_new_tokens: ClassVar[int] = 128
    depths: tuple[float, ...] | None = None  # the needle's depths (one cell each); None: each trial its own
    # the score a trial gets: RULER's string_match_all for every synthetic task
    score = staticmethod(string_match_all)

    def __init__(self, seed: int = 0, trials: int = 20) -> None:
        if trials < 1:
            raise ConfigError(f"task.trials must be >= 1 (prompts per length and depth), got {trials}")
        self.seed, self.trials = seed, trials

    def set_depths(self, depths: Sequence[float] | None) -> None:
        """The depths a task with a needle is scored at (fractions in [0, 1]); None: each trial draws its own."""
        if depths is None:
            return
        if not self.has_depth:
            raise ConfigError(f"the RULER task {self.name} has no needle depth (several needles); give no task.depths")
        if not depths or any(not 0.0 <= float(d) <= 1.0 for d in depths):
            raise ConfigError(f"task.depths are fractions in [0, 1] (0: first, 1: last), got {list(depths)}")
        self.depths = tuple(dict.fromkeys(float(d) for d in depths))

    def grid(self) -> list[float | None]:
        """The depth of each cell at a length: ``depths``, or one cell (None) whose trials draw their own."""
        return list(self.depths) if self.depths is not None else [None]

    def builder(self, rng: random.Random, trial: int, depth: float | None) -> Builder:
        """Draw everything random of a trial from ``rng``; return ``build(n)``: the prompt text
        with ``n`` haystack units, and the answers."""
        raise NotImplementedError

    def trial_builder(self, trial: int, depth: float | None) -> tuple[Builder, float | None]:
        """Trial ``trial``'s ``build(n)`` and its needle's depth (``depth``, or the trial's own)."""
        if depth is not None and not self.has_depth:
            raise ConfigError(f"the RULER task {self.name} has no needle depth; give none")
        if depth is not None and not 0.0 <= depth <= 1.0:
            raise ConfigError(f"a needle depth is a fraction in [0, 1], got {depth}")
        if depth is None and self.has_depth:  # a depth of the trial's own, uniform in [0, 1]
            depth = trial_rng(self.name, self.seed, trial, "depth").random()
        return self.builder(trial_rng(self.name, self.seed, trial), trial, depth), depth

    def prompt(self, tokenizer: Tokenizer, length: int, trial: int, depth: float | None = None) -> RulerPrompt:
        """Trial ``trial``'s prompt of at most ``length`` tokens, reference answer included
        (``depth`` in [0, 1] for a task with a needle; without one, the trial draws its own)."""
        build, depth = self.trial_builder(trial, depth)
        n, text, answers, ids, answer_ids = fit_units(build, tokenizer, length, self.least, self.name)
        return RulerPrompt(text, ids, answers, answer_ids, depth, n)

    def shortest(self, tokenizer: Tokenizer) -> int:
        """The shortest length (tokens, reference answer included) at which every trial's prompt
        fits at every depth of the grid: the longest of their prompts with ``least`` units."""
        return max(
            measure(self.trial_builder(t, d)[0], tokenizer, self.least)[0]
            for t in range(self.trials)
            for d in self.grid()
        )

    def prompts(self, tokenizer: Tokenizer, length: int, depth: float | None = None) -> list[RulerPrompt]:
        """``trials`` prompts at ``length`` (and ``depth``), trial i from seed i."""
        return [self.prompt(tokenizer, length, t, depth) for t in range(self.trials)]

    def describe(self) -> dict[str, object]:
        return {"task": self.name, "trials": self.trials}
