"""Frequent-words extraction, RULER's second aggregation task (Hsieh et al. 2024, §3;
NVIDIA/RULER's ``scripts/data/synthetic/freq_words_extraction.py``): coded words whose counts
follow a Zipf law, count(rank k) = ⌊N k^-α / Σ_j j^-α⌋ over ``vocabulary`` words; the top-ranked
word is written as dots (noise the question says to ignore) and the answer is ranks 2 to 4.
N, the words drawn, fills the length.
"""

from __future__ import annotations

import random

from posenc.core.errors import ConfigError
from posenc.tasks.ruler.base import Builder, RulerTask, coded_words, trial_rng

NOISE = "...."


class FrequentWordsTask(RulerTask):
    """Random six-letter coded words, shuffled; answers are the three most frequent after the noise."""

    name = "frequent_words"
    max_new_tokens = 50  # RULER's tokens_to_generate for fwe

    def __init__(self, alpha: float = 2.0, vocabulary: int = 2000, seed: int = 0, trials: int = 20) -> None:
        super().__init__(seed, trials)
        if alpha <= 1.0 or vocabulary < 5:
            raise ConfigError(f"task.alpha must be > 1 and task.vocabulary >= 5, got {alpha}, {vocabulary}")
        self.alpha, self.vocabulary = alpha, vocabulary
        norm = sum(k**-alpha for k in range(1, vocabulary + 1))
        self.weights = [k**-alpha / norm for k in range(1, vocabulary + 1)]
        # the fewest words at which ranks 2..5 have distinct, non-zero counts: the answer is unique
        n = 1
        while not self.counts(n)[1] > self.counts(n)[2] > self.counts(n)[3] > self.counts(n)[4] > 0:
            n += 1
        self.least = n

    def counts(self, n: int) -> list[int]:
        """Each rank's count among ``n`` words drawn."""
        return [int(n * w) for w in self.weights]

    def builder(self, rng: random.Random, trial: int, depth: float | None) -> Builder:
        vocab = [NOISE, *coded_words(rng, self.vocabulary - 1)]
        head = (
            "Read the coded text below and keep count of how often each coded word occurs; "
            "find the three most frequent ones. "
        )
        tail = (
            f"\nQuestion: ignoring the dots '{NOISE}', which three coded words occur most often in the text above? "
            "Give no explanation. Answer: the three most frequent coded words in the text above are:"
        )

        def build(n: int) -> tuple[str, list[str]]:
            words = [w for w, c in zip(vocab, self.counts(n)) for _ in range(c)]
            trial_rng(self.name, self.seed, trial, "order", n).shuffle(words)
            return head + " ".join(words) + tail, vocab[1:4]

        return build
