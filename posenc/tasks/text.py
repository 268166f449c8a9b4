"""Byte-level language modelling on built-in or user text.

The default corpus is the documentation that ships inside every CPython (``pydoc_data.topics``),
so a run needs no download; ``source: stdlib`` reads the standard library's own sources;
``path`` takes any file as bytes. The split is deterministic: the first
``1 - val_fraction - test_fraction`` of the bytes train, the next ``val_fraction`` validate (and
stop training), the last ``test_fraction`` are the test split the tables report.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import ClassVar, Literal

import torch

from posenc.core.errors import ConfigError
from posenc.tasks.base import Criterion, EvalSplit, SequenceTask


def builtin_corpus(source: Literal["pydoc", "stdlib"], max_bytes: int | None = None) -> bytes:
    """The bytes of a corpus that ships with Python, in a fixed order."""
    if source == "pydoc":
        data = "\n\n".join(builtin_documents()).encode("utf-8")
    else:
        root = Path(sysconfig.get_paths()["stdlib"])
        parts, total = [], 0
        for f in sorted(root.glob("*.py")):
            parts.append(f.read_bytes())
            total += len(parts[-1])
            if max_bytes is not None and total >= max_bytes:
                break
        data = b"\n".join(parts)
    return data[:max_bytes] if max_bytes is not None else data


def builtin_documents() -> list[str]:
    """The pydoc corpus as documents, one per topic in sorted order (``builtin_corpus("pydoc")``
    is the same texts joined by blank lines)."""
    from pydoc_data.topics import topics

    return [topics[k] for k in sorted(topics)]


class TextTask(SequenceTask):
    """Next-byte prediction: random training windows, non-overlapping validation windows."""

    vocab_size = 256
    criterion: ClassVar[Criterion] = "bpb"  # judged by bits per byte: training stops at train.target_bpb

    def __init__(
        self,
        path: str | None = None,
        source: Literal["pydoc", "stdlib"] = "pydoc",
        val_fraction: float = 0.1,
        max_bytes: int | None = None,
        test_fraction: float = 0.1,
    ) -> None:
        if not 0.0 < val_fraction < 1.0:
            raise ConfigError(f"task.val_fraction must be in (0, 1), got {val_fraction}")
        if not 0.0 < test_fraction < 1.0 or val_fraction + test_fraction >= 1.0:
            raise ConfigError(
                f"task.test_fraction must be in (0, 1) and leave bytes to train beside task.val_fraction, "
                f"got {test_fraction} and {val_fraction}"
            )
        if path is not None:
            p = Path(path).expanduser()
            if not p.exists():
                raise ConfigError(f"task.path '{path}' does not exist")
            if p.is_dir():
                raise ConfigError(f"task.path '{path}' is a directory; give a text file")
            data = p.read_bytes()[:max_bytes]
            if not data:
                raise ConfigError(f"task.path '{path}' is empty")
            self.name = p.name
        else:
            data = builtin_corpus(source, max_bytes)
            self.name = source
        val_start = int(len(data) * (1 - val_fraction - test_fraction))
        test_start = int(len(data) * (1 - test_fraction))
        all_bytes = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        self.splits = {
            "train": all_bytes[:val_start],
            "val": all_bytes[val_start:test_start],
            "test": all_bytes[test_start:],
        }

    def check_length(self, seq_len: int, split: str = "train") -> None:
        """A window of ``seq_len`` inputs needs ``seq_len + 1`` bytes of the split."""
        n = len(self.splits[split])
        if seq_len < 1:
            raise ConfigError(f"sequence length must be >= 1, got {seq_len}")
        if seq_len + 1 > n:
            raise ConfigError(
                f"sequence length {seq_len} is longer than the {split} split of '{self.name}' "
                f"({n} bytes); use a shorter length or a larger corpus"
            )

    def train_batch(self, batch_size: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows of ``size`` = s bytes: (b, s) inputs and (b, s) next-byte targets."""
        data = self.splits["train"]
        starts = torch.randint(0, len(data) - size, (batch_size,), generator=generator)
        idx = starts[:, None] + torch.arange(size + 1)  # (b, s+1)
        chunk = data[idx].long()
        return chunk[:, :-1], chunk[:, 1:]

    def eval_set(
        self, size: int, max_items: int | None = None, split: EvalSplit = "val"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Non-overlapping windows over ``split`` (from its start): (n, s) inputs and targets."""
        data = self.splits[split]
        n = (len(data) - 1) // size
        if max_items is not None:
            n = min(n, max_items)
        x = data[: n * size].long().view(n, size)
        y = data[1 : n * size + 1].long().view(n, size)
        return x, y

    def unigram_bits_per_byte(self) -> float:
        """Cross-entropy of test bytes under train byte frequencies (add-one), in bits."""
        counts = torch.bincount(self.splits["train"].long(), minlength=256).double() + 1.0
        logp = (counts / counts.sum()).log2()
        return float(-logp[self.splits["test"].long()].mean())

    def describe(self) -> dict[str, float | str]:
        return {
            "corpus": self.name,
            "train_bytes": len(self.splits["train"]),
            "val_bytes": len(self.splits["val"]),
            "test_bytes": len(self.splits["test"]),
            "unigram_bpb": self.unigram_bits_per_byte(),
        }
