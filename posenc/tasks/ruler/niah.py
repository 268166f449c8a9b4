"""Needle in a haystack, RULER's retrieval family (Hsieh et al. 2024, §3; NVIDIA/RULER's
``scripts/data/synthetic/niah.py``): key-value needles hidden in a haystack, the values of some
keys asked for at the end.

One class covers the family's settings as RULER's ``synthetic.yaml`` does: ``keys`` needles'
keys (multi-key: the rest are distractors), ``values`` values a key (multi-value: all are asked
for), ``queries`` keys asked (multi-query); the haystack is a repeated filler passage
(``filler``), sentences of the built-in corpus (``essay``), or needles of other keys
(``distractors``). A single needle sits at a requested depth (``depths``: one cell each, as
passkey's); several sit at depths of their own.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import Literal

from posenc.core.errors import ConfigError
from posenc.tasks.ruler.base import Builder, RulerTask, corpus_sentences, corpus_words, insert_at, trial_rng

Haystack = Literal["filler", "essay", "distractors"]
Kind = Literal["words", "numbers", "uuids"]
FILLER = "The river keeps running to the sea. The hills stay where they are. Morning comes again."
NEEDLE = "One special magic {kind} for {key} is {value}."


def draw(rng: random.Random, kind: Kind) -> str:
    """A random word of the corpus, seven-digit number or UUID."""
    if kind == "words":
        return rng.choice(corpus_words())
    if kind == "numbers":
        return str(rng.randint(1_000_000, 9_999_999))
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


class NeedleTask(RulerTask):
    """RULER's niah tasks (single, multi-key, multi-value, multi-query), on three haystacks."""

    def __init__(
        self,
        haystack: Haystack = "filler",
        keys: int = 1,
        values: int = 1,
        queries: int = 1,
        key_kind: Kind = "words",
        value_kind: Kind = "numbers",
        depths: Sequence[float] | None = None,
        seed: int = 0,
        trials: int = 20,
    ) -> None:
        super().__init__(seed, trials)
        if haystack not in ("filler", "essay", "distractors"):
            raise ConfigError(f"task.haystack must be one of: filler, essay, distractors; got {haystack!r}")
        for what, kind in (("key_kind", key_kind), ("value_kind", value_kind)):
            if kind not in ("words", "numbers", "uuids"):
                raise ConfigError(f"task.{what} must be one of: words, numbers, uuids; got {kind!r}")
        if keys < 1 or values < 1 or not 1 <= queries <= keys:
            raise ConfigError(
                f"task.keys and task.values must be >= 1 and task.queries in 1..keys, got {keys}, {values}, {queries}"
            )
        self.haystack, self.keys, self.values, self.queries = haystack, keys, values, queries
        self.key_kind, self.value_kind = key_kind, value_kind
        self.has_depth = keys * values == 1
        self.name = f"niah_{haystack}" + "".join(
            f"_{n}{part}" for n, part in ((keys, "k"), (values, "v"), (queries, "q")) if n > 1
        )
        self.set_depths(depths)

    def builder(self, rng: random.Random, trial: int, depth: float | None) -> Builder:
        keys: list[str] = []
        while len(keys) < self.keys:
            key = draw(rng, self.key_kind)
            keys += [key] if key not in keys else []
        values = [[draw(rng, self.value_kind) for _ in range(self.values)] for _ in keys]
        kind = self.value_kind[:-1]  # "number", "word", "uuid"
        needles = [NEEDLE.format(kind=kind, key=k, value=v) for k, vs in zip(keys, values) for v in vs]
        rng.shuffle(needles)
        depths = [depth] if depth is not None else [rng.random() for _ in needles]
        asked = sorted(rng.sample(range(self.keys), self.queries))
        query = ", ".join(keys[i] for i in asked[:-1]) + (" and " if len(asked) > 1 else "") + keys[asked[-1]]
        answers = [v for i in asked for v in values[i]]
        plural = len(answers) > 1
        kinds = f"{kind}s" if plural else kind
        head = (
            f"{'Some special magic' if plural else 'A special magic'} {kinds} {'are' if plural else 'is'} "
            "hidden in the text below. Remember them: you will be asked about them afterwards.\n"
        )
        tail = (
            f"\nWhat {'are all the' if plural else 'is the'} special magic {kinds} for {query} in the text above?"
            f" The special magic {kinds} for {query} in the text above {'are' if plural else 'is'}"
        )
        taken = set(keys)

        def distractor(i: int) -> str:
            r = trial_rng(self.name, self.seed, trial, "distractor", i)
            key = draw(r, self.key_kind)
            while key in taken:
                key = draw(r, self.key_kind)
            return NEEDLE.format(kind=kind, key=key, value=draw(r, self.value_kind))

        def build(n: int) -> tuple[str, list[str]]:
            if self.haystack == "essay":
                sentences = corpus_sentences()
                units = [sentences[i % len(sentences)] for i in range(n)]
            elif self.haystack == "filler":
                units = [FILLER] * n
            else:
                units = [distractor(i) for i in range(n)]
            context = (" " if self.haystack == "essay" else "\n").join(insert_at(units, needles, depths))
            return head + context + tail, answers

        return build
