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


# x86 flags of matrix instructions that run bfloat16 matmuls at or above float32's rate
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str] | None:
    """The first processor's flags in ``cpuinfo`` (Linux x86), None where there are none to read."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return None


def slow_dtype_line(dtype: torch.dtype | None, device: torch.device | str, flags: set[str] | None = None) -> str | None:
    """One line for a run about to compute in bfloat16 on a CPU without bf16 matrix instructions
    (``BF16_CPU_FLAGS``), where PyTorch falls back to a slow path: on an AVX2 AMD EPYC a 2048²
    bf16 matmul ran at 0.3 GFLOP/s against 96 in float32. None elsewhere, or where the flags
    cannot be read (another OS, ARM). ``flags``: the CPU's, read from /proc/cpuinfo by default."""
    if dtype != torch.bfloat16 or torch.device(device).type != "cpu":
        return None
    flags = cpu_flags() if flags is None else flags
    if flags is None or "avx2" not in flags or any(f in flags for f in BF16_CPU_FLAGS):
        return None
    return (
        "this CPU has no bfloat16 matrix instructions (AVX-512 BF16 or AMX): bf16 matmuls run far "
        "slower than float32 here; use float32 (--dtype float32, train.precision=fp32)"
    )
