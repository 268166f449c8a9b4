"""RULER prompt tasks on two tokenizers: within the budget and close to it, one prompt a seed,
20 trials distinct, a length too short named with the shortest that fits; scoring as RULER's."""

import pytest
import yaml
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from posenc.core.errors import ConfigError
from posenc.engine.config import config_root, instantiate
from posenc.tasks.ruler.base import ByteTokenizer, insert_at, string_match_all, string_match_part
from posenc.tasks.ruler.common_words import CommonWordsTask
from posenc.tasks.ruler.frequent_words import FrequentWordsTask
from posenc.tasks.ruler.niah import NeedleTask
from posenc.tasks.ruler.variable_tracking import VariableTrackingTask
from posenc.tasks.text import builtin_documents


@pytest.fixture(scope="module")
def bpe():
    """A byte-level BPE of 600 tokens trained in memory on the built-in corpus (a real
    tokenizer's merges: pieces cross the seams between haystack units)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(builtin_documents()[:200], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok)


TASKS = [
    NeedleTask("filler"),
    NeedleTask("essay", value_kind="uuids"),
    NeedleTask("distractors", key_kind="uuids", value_kind="uuids"),
    NeedleTask("essay", keys=4, values=2, queries=2),
    VariableTrackingTask(chains=2, hops=3),
    CommonWordsTask(common=5, common_repeats=6, rare_repeats=1),
    FrequentWordsTask(vocabulary=200),
]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
@pytest.mark.parametrize("tokenizer", ["bytes", "bpe"])
def test_prompts_fit_the_budget_one_per_seed(task, tokenizer, bpe):
    tok = ByteTokenizer() if tokenizer == "bytes" else bpe
    length = 1500
    prompts = task.prompts(tok, length)
    assert len(prompts) == 20
    for p in prompts:
        assert len(p.ids) + len(p.answer_ids) == len(p) <= length
        assert p.ids == tok.encode(p.text, add_special_tokens=False)
        assert tok.decode(p.ids) == p.text
        # one more unit would not fit: the prompt is as long as the budget allows
        more = type(task).__new__(type(task))
        more.__dict__ |= task.__dict__ | {"least": p.units + 1}
        with pytest.raises(ConfigError):
            more.prompt(tok, length, prompts.index(p), p.depth)
    assert len({p.text for p in prompts}) == 20 and len({tuple(p.answers) for p in prompts}) == 20
    again = task.prompt(tok, length, 3, prompts[3].depth)
    assert again == prompts[3]
    other = type(task).__new__(type(task))
    other.__dict__ |= task.__dict__ | {"seed": 1}
    assert other.prompt(tok, length, 3, prompts[3].depth).text != prompts[3].text


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_a_length_too_short_names_the_shortest_that_fits(task):
    tok = ByteTokenizer()
    with pytest.raises(ConfigError, match=r"length 50 is too short for the RULER task .*takes (\d+) tokens") as e:
        task.prompt(tok, 50, 0)
    shortest = int(e.value.args[0].rsplit("takes ", 1)[1].split()[0])
    p = task.prompt(tok, shortest, 0)
    assert len(p) == shortest and p.units >= task.least  # more units may add no token (fwe: the same counts)
    with pytest.raises(ConfigError, match=f"takes {shortest} tokens"):
        task.prompt(tok, shortest - 1, 0)


def test_depth_is_a_fraction_of_a_needle_task():
    with pytest.raises(ConfigError, match="has no needle depth"):
        VariableTrackingTask().prompt(ByteTokenizer(), 1000, 0, depth=0.5)
    with pytest.raises(ConfigError, match="has no needle depth"):
        NeedleTask(keys=2).prompt(ByteTokenizer(), 1000, 0, depth=0.5)
    with pytest.raises(ConfigError, match=r"fraction in \[0, 1\], got 1.5"):
        NeedleTask().prompt(ByteTokenizer(), 1000, 0, depth=1.5)
    drawn = [NeedleTask().prompt(ByteTokenizer(), 1000, t).depth for t in range(20)]
    assert all(0 <= d <= 1 for d in drawn) and len(set(drawn)) == 20


def test_insert_at_places_items_at_fractions():
    units = list("abcd")
    assert insert_at(units, ["X"], [0.0]) == ["X", *units]
    assert insert_at(units, ["X"], [1.0]) == [*units, "X"]
    assert insert_at(units, ["X", "Y"], [0.5, 0.5]) == ["a", "b", "X", "Y", "c", "d"]
    assert insert_at(units, ["X", "Y"], [0.75, 0.25]) == ["a", "Y", "b", "c", "X", "d"]


def test_scoring_is_rulers_case_insensitive_substring_match():
    answers = ["7654321", "ABCDE"]
    assert string_match_all(" 7654321 and abcde.", answers) == 1.0  # right, case ignored
    assert string_match_all("The numbers are 7654321, 1111111 and ABCDE, I think.", answers) == 1.0  # extra text
    assert string_match_all(" 7654321.", answers) == 0.5  # partial
    assert string_match_all(" 7654320, ABCDF", answers) == 0.0  # wrong
    assert string_match_all("", answers) == 0.0
    assert string_match_part(" 7654321.", answers) == 1.0 and string_match_part(" nothing", answers) == 0.0
    assert string_match_all("17654321", ["7654321"]) == 1.0  # a substring, as RULER scores it


@pytest.mark.parametrize(
    "name,cls,fields",
    [
        ("niah_single_1", NeedleTask, {"haystack": "filler", "keys": 1, "has_depth": True}),
        ("niah_multikey_3", NeedleTask, {"haystack": "distractors", "key_kind": "uuids", "value_kind": "uuids"}),
        ("niah_multiquery", NeedleTask, {"keys": 4, "queries": 4, "has_depth": False}),
        ("vt", VariableTrackingTask, {"chains": 1, "hops": 4}),
        ("cwe", CommonWordsTask, {"common": 10, "common_repeats": 30, "rare_repeats": 3}),
        ("fwe", FrequentWordsTask, {"alpha": 2.0, "vocabulary": 2000}),
    ],
)
def test_configs_instantiate_as_ruler_tasks(name, cls, fields):
    node = yaml.safe_load((config_root() / "task" / f"ruler_{name}.yaml").read_text())
    assert node["description"].startswith(f"ruler_{name} (real models, RULER {name}):")
    task = instantiate({**node, "seed": 0}, f"task/ruler_{name}")
    assert isinstance(task, cls) and task.trials == 20 and task.seed == 0
    assert {k: getattr(task, k) for k in fields} == fields
    # a needle's depths are a grid of cells, as passkey's; several needles sit at depths of their own
    assert task.grid() == ([0.0, 0.25, 0.5, 0.75, 1.0] if task.has_depth else [None])


def test_every_ruler_config_builds_a_prompt():
    paths = sorted(p for p in (config_root() / "task").iterdir() if p.name.startswith("ruler_"))
    prompt_tasks = [p for p in paths if "(real models" in yaml.safe_load(p.read_text())["description"]]
    assert len(prompt_tasks) == 11
    for path in prompt_tasks:
        task = instantiate({**yaml.safe_load(path.read_text()), "seed": 0}, f"task/{path.name}")
        assert not task.trains and task.input_kind == "text"
        for depth in task.grid():
            assert len(task.prompt(ByteTokenizer(), 16_000, 0, depth)) <= 16_000


def test_depths_are_fractions_of_a_single_needle():
    assert NeedleTask(depths=[0, 0.5, 0.5, 1]).grid() == [0.0, 0.5, 1.0]
    with pytest.raises(ConfigError, match="has no needle depth .*give no task.depths"):
        NeedleTask(keys=4, depths=[0.5])
    with pytest.raises(ConfigError, match=r"task.depths are fractions in \[0, 1\].*got \[0.5, 2\]"):
        NeedleTask(depths=[0.5, 2])
    with pytest.raises(ConfigError, match="got \\[\\]"):
        NeedleTask(depths=[])


@pytest.mark.parametrize("task", TASKS[:5], ids=lambda t: t.name)
def test_shortest_is_the_longest_trial_at_its_fewest_units(task, bpe):
    """Every trial fits at ``shortest``; one trial (the longest) does not at a token less."""
    shortest = task.shortest(bpe)
    sizes = [len(task.prompt(bpe, shortest, t, d)) for t in range(task.trials) for d in task.grid()]
    assert max(sizes) <= shortest
    failed = []
    for t in range(task.trials):
        try:
            task.prompt(bpe, shortest - 1, t)
        except ConfigError as e:
            failed.append(str(e))
    assert failed and all(f"takes {shortest} tokens" in e for e in failed)
