"""Common- and frequent-words extraction: counting the prompt's own words gives the answers, and
no word outside them ties with them."""

import re
from collections import Counter

import pytest

from posenc.core.errors import ConfigError
from posenc.tasks.ruler.base import ByteTokenizer
from posenc.tasks.ruler.common_words import CommonWordsTask
from posenc.tasks.ruler.frequent_words import NOISE, FrequentWordsTask


@pytest.mark.parametrize("length", [1200, 6000])
def test_common_words_are_the_most_counted_in_the_list(length):
    task = CommonWordsTask(common=5, common_repeats=6, rare_repeats=2)
    for p in task.prompts(ByteTokenizer(), length):
        items = re.findall(r"(\d+)\. ([a-z]+)", p.text.split("\n")[1])
        assert [int(i) for i, _ in items] == list(range(1, len(items) + 1))  # numbered in order
        counts = Counter(w for _, w in items)
        assert {counts[w] for w in p.answers} == {6}
        assert set(counts) - set(p.answers) and {c for w, c in counts.items() if w not in p.answers} == {2}
        assert len(counts) == 5 + p.units


def test_common_words_run_past_the_corpus_vocabulary():
    task = CommonWordsTask(common=3, common_repeats=3, rare_repeats=1)
    p = task.prompt(ByteTokenizer(), 200_000, 0)
    counts = Counter(re.findall(r"\d+\. ([a-z]+)", p.text))
    assert len(counts) == 3 + p.units and {counts[w] for w in p.answers} == {3}
    assert sorted(counts.values())[-4] == 1


@pytest.mark.parametrize("alpha", [1.5, 2.0, 3.0])
def test_frequent_words_are_ranks_two_to_four_of_the_text(alpha):
    task = FrequentWordsTask(alpha=alpha, vocabulary=300)
    for p in task.prompts(ByteTokenizer(), 4000):
        text = p.text.split("find the three most frequent ones. ", 1)[1].split("\nQuestion:", 1)[0]
        counts = Counter(text.split())
        ranked = [w for w, _ in counts.most_common()]
        assert ranked[0] == NOISE and ranked[1:4] == p.answers
        c = [counts[w] for w in ranked]
        assert c[0] > c[1] > c[2] > c[3] > c[4]  # the answer is unique
        assert sum(c) == sum(task.counts(p.units))


def test_bad_settings_are_one_line():
    with pytest.raises(ConfigError, match="task.rare_repeats < task.common_repeats, got 10, 3, 3"):
        CommonWordsTask(common_repeats=3)
    with pytest.raises(ConfigError, match="task.alpha must be > 1"):
        FrequentWordsTask(alpha=1.0)
