import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.tasks.text import TextTask, builtin_corpus


def test_builtin_corpus_split_is_deterministic():
    a, b = TextTask(), TextTask()
    assert torch.equal(a.splits["val"], b.splits["val"])
    total = len(builtin_corpus("pydoc"))
    assert len(a.splits["train"]) == int(total * 0.8)  # 10% validation, 10% test
    assert len(a.splits["train"]) + len(a.splits["val"]) + len(a.splits["test"]) == total
    assert 4.0 < a.unigram_bits_per_byte() < 5.5


def test_batches_are_next_byte_windows_from_a_seeded_generator():
    task = TextTask()
    x1, y1 = task.train_batch(4, 16, torch.Generator().manual_seed(3))
    x2, y2 = task.train_batch(4, 16, torch.Generator().manual_seed(3))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == y1.shape == (4, 16)
    assert torch.equal(x1[:, 1:], y1[:, :-1])
    x, y = task.eval_set(32, max_items=5)
    assert x.shape == (5, 32)
    assert torch.equal(x.flatten()[1:], y.flatten()[:-1])  # windows are contiguous and do not overlap


def test_user_file(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_bytes(bytes(range(200)) * 3)
    task = TextTask(path=str(f), val_fraction=0.4, test_fraction=0.1)
    assert task.splits["train"].tolist() == (list(range(200)) * 3)[:300]
    task.check_length(299)
    with pytest.raises(ConfigError, match="longer than the train split"):
        task.check_length(300)


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: str(p / "missing.txt"), "does not exist"),
        (lambda p: str(p), "is a directory"),
        (lambda p: (p / "empty.txt").write_text("") and None or str(p / "empty.txt"), "is empty"),
    ],
)
def test_bad_paths(tmp_path, make, message):
    with pytest.raises(ConfigError, match=message):
        TextTask(path=make(tmp_path))
