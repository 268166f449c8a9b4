"""Variable tracking, RULER's multi-hop tracing task (Hsieh et al. 2024, §3; NVIDIA/RULER's
``scripts/data/synthetic/variable_tracking.py``): chains of assignments ``VAR A = 12345``,
``VAR B = VAR A``, … hidden in filler, in order; the answer is every variable of the first chain,
the one whose value the question names. Other chains carry other values.
"""

from __future__ import annotations

import random

from posenc.core.errors import ConfigError
from posenc.tasks.ruler.base import Builder, RulerTask, insert_at
from posenc.tasks.ruler.niah import FILLER


class VariableTrackingTask(RulerTask):
    """``chains`` chains of ``hops`` assignments after the first, in repeated filler."""

    name = "variable_tracking"
    max_new_tokens = 30  # RULER's tokens_to_generate for vt

    def __init__(self, chains: int = 1, hops: int = 4, seed: int = 0, trials: int = 20) -> None:
        super().__init__(seed, trials)
        if chains < 1 or hops < 1:
            raise ConfigError(f"task.chains and task.hops must be >= 1, got {chains}, {hops}")
        self.chains, self.hops = chains, hops

    def builder(self, rng: random.Random, trial: int, depth: float | None) -> Builder:
        names: list[str] = []
        while len(names) < self.chains * (self.hops + 1):
            name = "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=5))
            names += [name] if name not in names else []
        values = rng.sample(range(10_000, 100_000), self.chains)
        lines, places = [], []
        for c in range(self.chains):
            chain = names[c * (self.hops + 1) : (c + 1) * (self.hops + 1)]
            lines += [f"VAR {chain[0]} = {values[c]}."] + [f"VAR {b} = VAR {a}." for a, b in zip(chain, chain[1:])]
            places += sorted(rng.random() for _ in chain)  # a chain's assignments in order
        answers = names[: self.hops + 1]
        head = "Keep track of the chains of variable assignments hidden in the text below.\n\n"
        tail = (
            f"\nQuestion: which variables are assigned the value {values[0]} in the text above? Answer: "
            f"following the assignments in the text above, {self.hops + 1} variables are assigned the value "
            f"{values[0]}; they are:"
        )

        def build(n: int) -> tuple[str, list[str]]:
            return head + "\n".join(insert_at([FILLER] * n, lines, places)) + tail, answers

        return build
