"""The passkey table of a folder of remap runs (default: this file's folder): every run folder's
passkey trials (`cells.jsonl`: key, decoded text, seconds; `config.yaml`: the remap's settings;
`time.txt`: the `/usr/bin/time -v` lines of the command) pooled into `passkey_remaps.md`/`.csv`
(per method: keys found with the 95% Wilson interval, the commonest answers, median seconds a
trial, the wall time and peak RSS of the run that first scored it) and `passkey_pairs.md`/`.csv`
(each method against the unscaled model trial by trial, since every run reads the same prompts:
the trials only one of them found, the exact McNemar p-value, and that p Holm-corrected over the
table).

    python results/real/remaps/passkey/table.py
"""

import json
import re
import sys
from pathlib import Path

import pandas as pd
import yaml

from posenc.analysis.stats import mcnemar_pairs, wilson_interval

here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
configs = {p: yaml.safe_load((p / "config.yaml").read_text()) for p in here.iterdir() if (p / "cells.jsonl").exists()}
# runs without a remap first: a remap's run re-reads the unscaled trials, which belong to the run that scored them
runs = sorted(configs, key=lambda p: (bool(configs[p].get("remap")), p.name))
trials, rows = [], []
for run in runs:
    remap = configs[run].get("remap") or {}
    settings = ", ".join(f"{k}={v}" for k, v in remap.items() if k not in ("name", "original_length"))
    records = [c for c in map(json.loads, (run / "cells.jsonl").read_text().splitlines()) if "passkey" in c]
    part = pd.DataFrame(records).assign(method=lambda t: t.scale)
    part = part[~part.method.isin(m for earlier in trials for m in earlier.method)]  # a baseline scored again
    trials.append(part)
    timing = (run / "time.txt").read_text()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", timing).group(1)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", timing).group(1))
    for (method, length, depth), cell in part.groupby(["method", "length", "depth"]):
        found, n = int(cell.correct.sum()), len(cell)
        low, high = wilson_interval(found, n)
        answers = cell.decoded.str.strip().where(~cell.correct, "the key").value_counts().head(3)
        rows.append(
            {
                "method": method,
                "remap settings": settings or "—",
                "length": length,
                "depth": depth,
                "found": f"{found}/{n}",
                "95% Wilson": f"{low:.2f}–{high:.2f}",
                "commonest answers": ", ".join(f"{json.dumps(a)} {c}×" for a, c in answers.items()),
                "median s / trial": round(cell.seconds.median(), 1),
                "wall (run)": wall,
                "peak RSS GiB (run)": round(rss / 2**20, 2),
            }
        )
table = pd.DataFrame(rows)
pairs = mcnemar_pairs(
    pd.concat(trials), arm="method", trial=["depth", "trial"], passed="correct", group="length", baseline="none"
)
for name, frame in (("passkey_remaps", table), ("passkey_pairs", pairs)):
    frame.to_csv(here / f"{name}.csv", index=False)
    (here / f"{name}.md").write_text(frame.to_markdown(index=False, floatfmt=".3g") + "\n")
    print(frame.to_markdown(index=False, floatfmt=".3g"), end="\n\n")
