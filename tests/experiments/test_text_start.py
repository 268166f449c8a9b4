"""A real model reads its input as its own tokenizer begins a text: Gemma's tokenizer puts
``<bos>`` before every text, and Gemma 3 270M's perplexity on the corpus is 70.1 without it, 21.6
with it. Perplexity windows, passkey prompts and RULER prompts all start with the tokenizer's
start tokens, and a tokenizer without any (SmolLM2's, the tests' BPE, bytes) changes nothing."""

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from posenc.experiments.real import passkey_prompt, window_ids  # noqa: E402
from posenc.tasks.ruler.base import ByteTokenizer, text_start  # noqa: E402
from posenc.tasks.ruler.niah import NeedleTask  # noqa: E402


@pytest.fixture(scope="module")
def plain():
    from hf_models import tiny_tokenizer

    return tiny_tokenizer()


@pytest.fixture(scope="module")
def with_bos():
    """The tests' BPE with a ``<bos>`` token its post-processor puts before every text, as Gemma's does."""
    from hf_models import tiny_tokenizer
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    backend = tiny_tokenizer().backend_tokenizer
    backend.add_special_tokens(["<bos>"])
    bos = backend.token_to_id("<bos>")
    backend.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", bos_token="<bos>")


def test_the_start_tokens_are_read_from_the_tokenizer(plain, with_bos):
    assert text_start(plain) == [] and text_start(ByteTokenizer()) == []
    assert text_start(with_bos) == [with_bos.bos_token_id]
    assert with_bos("The sky is blue.")["input_ids"][0] == with_bos.bos_token_id


def test_windows_start_with_bos_and_keep_their_length(plain, with_bos):
    tokens = torch.arange(100, 400)
    for tok, lead in ((plain, []), (with_bos, [with_bos.bos_token_id])):
        p = SimpleNamespace(settings=SimpleNamespace(lengths=[32, 64]), tokenizer=tok, tokens=tokens)
        for window in (0, 2):
            for n in (32, 64):
                ids = window_ids(p, window, n)
                assert ids.numel() == n
                assert ids.tolist() == lead + list(range(100 + 64 * window, 100 + 64 * window + n - len(lead)))
        # every length scores a prefix of the same window
        assert torch.equal(window_ids(p, 1, 64)[:32], window_ids(p, 1, 32))


def test_passkey_prompts_start_with_bos_and_keep_their_layout(plain, with_bos):
    for depth in (0, 50, 100):
        a, b = passkey_prompt(plain, 300, depth, 12345), passkey_prompt(with_bos, 300, depth, 12345)
        assert b.ids[0] == with_bos.bos_token_id and a.ids[0] != with_bos.bos_token_id
        assert b.ids.numel() <= 300
        # the same pieces after the BOS; one sentence fewer of filler at most
        assert b.question - b.needle_end + b.needle - 1 <= a.question - a.needle_end + a.needle
        assert b.ids[b.needle : b.needle_end].tolist() == a.ids[a.needle : a.needle_end].tolist()
        assert b.ids[b.question :].tolist() == a.ids[a.question :].tolist()


def test_ruler_prompts_start_with_bos_and_fit(plain, with_bos):
    task = NeedleTask("filler")
    a, b = task.prompt(plain, 400, 3, depth=0.5), task.prompt(with_bos, 400, 3, depth=0.5)
    assert b.ids[0] == with_bos.bos_token_id and a.ids[0] != with_bos.bos_token_id
    assert len(b) <= 400 and len(a) <= 400
    assert b.answers == a.answers
