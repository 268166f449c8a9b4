"""The remap table of a folder from its runs (default: this file's folder): one row per scored
cell of each run folder (its `config.yaml`, `table.csv`, `cells.jsonl` with each cell's forward
seconds, and `time.txt`, the `/usr/bin/time -v` lines of the command), written to `remaps.csv` and
`remaps.md` in that folder. Each run scores one length, the table's last column.

    python results/real/remaps/table.py                         # 2x: 16,384 tokens
    python results/real/remaps/table.py results/real/remaps/4x  # 4x: 32,768 tokens
"""

import json
import re
import sys
from pathlib import Path

import pandas as pd
import yaml

here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
rows = []
for run in sorted(p for p in here.iterdir() if (p / "table.csv").exists()):
    remap = yaml.safe_load((run / "config.yaml").read_text()).get("remap") or {}
    settings = ", ".join(f"{k}={v}" for k, v in remap.items() if k not in ("name", "original_length"))
    seconds = {c["scale"]: c["seconds"] for c in map(json.loads, (run / "cells.jsonl").read_text().splitlines())}
    timing = (run / "time.txt").read_text()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", timing).group(1)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", timing).group(1))
    scored = pd.read_csv(run / "table.csv")
    table = scored.pivot(index="scale", columns="metric", values=scored.columns[-1])
    for scale, row in table.iterrows():
        rows.append(
            {
                "run": run.name,
                "scale": scale,
                "remap": remap.get("name", "—"),
                "settings": settings or "—",
                "ppl": round(row["ppl"], 3),
                "tail_ppl": round(row["tail_ppl"], 3),
                "forward s": round(seconds[scale]),
                "wall (run)": wall,
                "peak RSS GiB (run)": round(rss / 2**20, 2),
            }
        )
out = pd.DataFrame(rows).drop_duplicates(["scale", "remap", "settings"]).sort_values("tail_ppl")
out.to_csv(here / "remaps.csv", index=False)
(here / "remaps.md").write_text(out.to_markdown(index=False) + "\n")
print(out.to_markdown(index=False))
