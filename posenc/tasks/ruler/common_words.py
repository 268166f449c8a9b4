"""Common-words extraction, RULER's aggregation task (Hsieh et al. 2024, §3; NVIDIA/RULER's
``scripts/data/synthetic/common_words_extraction.py``): a numbered list of words in which
``common`` words occur ``common_repeats`` times each and the rest ``rare_repeats`` times; the
answer is the common words. The number of rare words fills the length.
"""

from __future__ import annotations

import random

from posenc.core.errors import ConfigError
from posenc.tasks.ruler.base import Builder, RulerTask, coded_words, corpus_words, trial_rng


class CommonWordsTask(RulerTask):
    """Words of the built-in corpus (random coded words once they run out), shuffled."""

    name = "common_words"
    max_new_tokens = 120  # RULER's tokens_to_generate for cwe

    def __init__(
        self, common: int = 10, common_repeats: int = 30, rare_repeats: int = 3, seed: int = 0, trials: int = 20
    ) -> None:
        super().__init__(seed, trials)
        if common < 1 or not 1 <= rare_repeats < common_repeats:
            raise ConfigError(
                "task.common must be >= 1 and 1 <= task.rare_repeats < task.common_repeats, "
                f"got {common}, {rare_repeats}, {common_repeats}"
            )
        self.common, self.common_repeats, self.rare_repeats = common, common_repeats, rare_repeats

    def builder(self, rng: random.Random, trial: int, depth: float | None) -> Builder:
        words = list(corpus_words())
        rng.shuffle(words)
        common = words[: self.common]
        head = (
            "Below is a numbered list of words. Some words occur more often than others; "
            "remember the ones that occur most often.\n"
        )
        tail = (
            f"\nQuestion: which are the {self.common} most common words in the list above? "
            f"Answer: the {self.common} words that occur most often in the list are:"
        )

        def build(n: int) -> tuple[str, list[str]]:
            rare = words[self.common : self.common + n]
            if len(rare) < n:  # past the corpus's vocabulary: coded words of the trial's own
                more = coded_words(trial_rng(self.name, self.seed, trial, "coded"), n - len(rare), 7, frozenset(words))
                rare += more
            items = common * self.common_repeats + rare * self.rare_repeats
            trial_rng(self.name, self.seed, trial, "order", n).shuffle(items)
            return head + " ".join(f"{i + 1}. {w}" for i, w in enumerate(items)) + tail, common

        return build
