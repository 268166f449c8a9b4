"""The attention sinks' passkey table of this folder's runs (one folder per depth, and the unscaled
model at its trained length as the control): every trial (`cells.jsonl`: key, decoded text,
seconds) pooled into `passkey_sinks.md`/`.csv` (per run: keys
found with the 95% Wilson interval, the commonest answers, median seconds a trial and the seconds of
all its cells, perplexity forward included) and `passkey_sinks_pairs.md`/`.csv` (every two runs
trial by trial, since trial t reads key `passkey_key(t)` in each: the trials only one found, the
exact McNemar p-value and that p Holm-corrected over the three pairs).

    python results/real/remaps/passkey_sinks/table.py
"""

import json
import sys
from pathlib import Path

import pandas as pd

from posenc.analysis.stats import mcnemar_pairs
from posenc.experiments.real import passkey_table

here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
runs = sorted(p for p in here.iterdir() if (p / "cells.jsonl").exists())
trials, rows = [], []
for run in runs:
    cells = [json.loads(line) for line in (run / "cells.jsonl").read_text().splitlines()]
    part = pd.DataFrame([c for c in cells if "passkey" in c])
    trials.append(part.assign(arm=f"{part.scale.iloc[0]} {part.length.iloc[0]} depth {part.depth.iloc[0]:g}"))
    answers = part.decoded.str.strip().where(~part.correct, "the key").value_counts().head(3)
    (summary,) = passkey_table(part.to_dict("records")).to_dict("records")  # one length and depth a run
    rows.append(
        {
            "method": summary["scale"],
            "length": summary["length"],
            "depth": summary["depth"],
            "needle tokens": f"{part.needle.iloc[0]}–{part.needle_end.iloc[0]}",
            "question": part.question.iloc[0],
            "found": f"{summary['correct']}/{summary['trials']}",
            "95% Wilson": f"{summary['ci95_low']:.2f}–{summary['ci95_high']:.2f}",
            "commonest answers": ", ".join(f"{json.dumps(a)} {c}×" for a, c in answers.items()),
            "median s / trial": round(part.seconds.median(), 1),
            "seconds (all cells)": round(sum(c["seconds"] for c in cells)),
        }
    )
table = pd.DataFrame(rows)
pairs = mcnemar_pairs(pd.concat(trials), arm="arm", trial="trial", passed="correct")
for name, frame in (("passkey_sinks", table), ("passkey_sinks_pairs", pairs)):
    frame.to_csv(here / f"{name}.csv", index=False)
    (here / f"{name}.md").write_text(frame.to_markdown(index=False, floatfmt=".3g") + "\n")
    print(frame.to_markdown(index=False, floatfmt=".3g"), end="\n\n")
