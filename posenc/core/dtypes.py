"""One table of floating-point dtype spellings, so that ``train.precision`` (mixed precision) and
``--dtype`` / ``model.dtype`` (a real model's weights) take the same names: ``fp32``/``float32``,
``bf16``/``bfloat16``, ``fp16``/``float16``."""

from __future__ import annotations

import torch

from posenc.core.errors import ConfigError

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SHORT = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the short spelling of each


def spellings() -> list[str]:
    """Every accepted name, short then long (``fp32, float32, bf16, bfloat16, fp16, float16``)."""
    return [name for short, long in SHORT.items() for name in (short, long)]


def dtype_name(name: str, what: str) -> str:
    """The long name (``bfloat16``) of either spelling; a ``ConfigError`` naming ``what`` (the key
    or option) and the accepted spellings otherwise."""
    long = SHORT.get(str(name), str(name))
    if long not in DTYPES:
        raise ConfigError(f"{what} '{name}' is not one of: {', '.join(spellings())}")
    return long


def torch_dtype(name: str, what: str) -> torch.dtype:
    """The torch dtype of either spelling (``bf16`` or ``bfloat16``: ``torch.bfloat16``)."""
    return DTYPES[dtype_name(name, what)]
