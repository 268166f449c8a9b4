"""The ``remaps`` case of ``posenc bench`` at quick sizes: a time row and a peak-memory row for
every remap option against the unremapped forward."""

from __future__ import annotations

import math

import pytest

from posenc.benchmarks.suite import CASES, Sizes
from posenc.engine.config import list_options


@pytest.mark.slow  # a fresh process per remap for its peak memory: ~25 s on the shared 2-core machine
def test_remap_rows_cover_every_remap():
    rows = CASES["remaps"](Sizes.quick(), threads=1)
    names = [n for n in list_options("remap") if n != "none"]
    assert [r["case"] for r in rows] == [f"{n} @ 64 {what} vs none" for n in names for what in ("time", "peak RSS")]
    for r in rows:
        assert r["benchmark"] == "remaps" and math.isfinite(r["ratio"]) and r["ratio"] > 0, r
        assert r["posenc"] > 0 and r["reference"] > 0
