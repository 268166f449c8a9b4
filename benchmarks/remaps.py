"""The ``remaps`` case of ``posenc bench``: a forward of lm_tiny (RoPE) at long lengths with each
position remap of ``configs/remap/`` against the same model's own forward (fused causal SDPA):
time in this process, interleaved (goal 2x), and the peak RSS of a fresh process for each (goal
1.5x). The model's context (``train.seq_len``, the remaps' ``original_length``) is a quarter of
the length, so the remaps run with their default settings at 4x their context."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import torch

from posenc.benchmarks.suite import _LONG_EVAL, Sizes, interleaved, row

# the long case's fresh-process forward (its peak RSS), building the remapped model instead
_REMAP_EVAL = _LONG_EVAL.replace(
    "suite import long_model\nmodel = long_model", "remaps import remap_model\nmodel = remap_model"
)
assert "remap_model(" in _REMAP_EVAL


def remap_model(name: str, length: int) -> torch.nn.Module:
    """lm_tiny with RoPE, trained context length / 4, remap ``name`` installed, in eval mode."""
    from posenc.engine.build import build
    from posenc.engine.config import compose

    setup = build(compose(["pe=rope", f"train.seq_len={max(8, length // 4)}", f"remap={name}"]))
    setup.remap.check_lengths(length)
    setup.model.set_remap(setup.remap)
    return setup.model.eval()


def _peak(name: str, length: int, threads: int) -> float | str:
    """Peak RSS in bytes of a fresh process running one forward of ``length`` tokens, or its error."""
    out = subprocess.run(
        [sys.executable, "-c", _REMAP_EVAL.format(name=name, length=length, threads=threads)],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        return (out.stderr.strip().splitlines() or ["failed"])[-1]
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss"])


def remap_forward(sizes: Sizes, threads: int) -> list[dict[str, Any]]:
    """Rows ``remaps``: each remap's forward time and peak RSS against the unremapped forward."""
    from posenc.engine.config import list_options

    rows = []
    gib = 2**30
    for length in sizes.long_lengths:
        x = torch.randint(0, 256, (1, length))
        plain = remap_model("none", length)
        base_peak = _peak("none", length, threads)
        if isinstance(base_peak, str):
            raise RuntimeError(f"the unremapped forward at {length} failed: {base_peak}")
        for name in list_options("remap"):
            if name == "none":
                continue
            model = remap_model(name, length)
            with torch.no_grad():
                t = interleaved(lambda: model(x), lambda: plain(x), threads, sizes.repeats, 0.0, warmup=1)
            r = row("remaps", f"{name} @ {length} time vs none", t.ours, t.reference, "s", "<= 2.0", False, 2.0)
            r["ratio"], r["met"] = 1 / t.ratio, bool(1 / t.ratio <= 2.0)  # the median of per-round ratios
            rows.append(r)
            peak = _peak(name, length, threads)
            ok = not isinstance(peak, str)
            rows.append(
                {
                    "benchmark": "remaps",
                    "case": f"{name} @ {length} peak RSS vs none",
                    "posenc": peak / gib if ok else float("nan"),
                    "reference": base_peak / gib,
                    "unit": "GiB",
                    "ratio": peak / base_peak if ok else float("nan"),
                    "goal": "<= 1.5" if ok else peak,
                    "met": ok and peak / base_peak <= 1.5,
                }
            )
    return rows
