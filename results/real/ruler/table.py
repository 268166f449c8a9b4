"""The RULER table of a folder of runs (default: this file's folder): every run folder's
`ruler_trials.csv` (one row per trial: the method, length, trial, whether every answer was found)
pooled into `ruler_table.md`/`.csv` (per method and length: trials with every answer found, the 95%
Wilson interval, mean string_match_all, the wrong answers that are another needle's value, decoding
forwards and seconds per trial) and
`ruler_pairs.md`/`.csv` (each pair of methods at each length, paired by trial, since every method
reads the same prompts: the trials only one of them got right, the exact McNemar p-value, and that
p Holm-corrected over every pair and length of the table). A trial two runs both scored (the
unscaled model runs beside every scale) must decode the same in both, and counts once.

    python results/real/ruler/table.py
"""

import gzip
import json
import re
import sys
from pathlib import Path

import pandas as pd
import yaml

from posenc.analysis.stats import mcnemar_pairs, wilson_interval

here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
runs = sorted(p for p in here.iterdir() if (p / "ruler_trials.csv").exists())
# a scale's factor is the run's (real.factor, by default the longest length over the trained one):
# the method names it, since a run of 8192 alone scales YaRN by 1, the model as shipped
factors = {run.name: yaml.safe_load((run / "config.yaml").read_text())["real"]["factor"] for run in runs}
trials = pd.concat(pd.read_csv(run / "ruler_trials.csv").assign(run=run.name) for run in runs)
trials["method"] = [
    scale if scale.startswith("none") else f"{scale} ×{factors[run]:g}" for scale, run in zip(trials.scale, trials.run)
]
# a cell scored again by a later run (the unscaled model beside another scale) must decode the same
# (greedy decoding of the same prompt); it counts once, as its first run read it
key = ["method", "length", "trial"]
again = trials[trials.duplicated(key, keep=False)].groupby(key).decoded.nunique()
if (again > 1).any():
    raise SystemExit(f"cells scored twice decode differently: {list(again[again > 1].index)}")
replicated = trials.duplicated(key).sum()
trials = trials.drop_duplicates(key)
NEEDLE = r"One special magic \w+ for \S+ is (\S+)\."  # a needle's value
# the needles of each prompt (posenc.tasks.ruler.niah's NEEDLE): a wrong answer that is another key's value
# every run's prompts (one seed; keyed by length and trial), kept once, compressed, beside the runs
needles = {}
for line in gzip.open(here / "ruler_prompts.jsonl.gz", "rt", encoding="utf-8"):
    prompt = json.loads(line)
    needles[prompt["length"], prompt["trial"]] = re.findall(NEEDLE, prompt["text"])
trials["distractor"] = [
    not found and any(value in json.loads(text) for value in set(needles[n, t]) - set(json.loads(answers)))
    for found, text, answers, n, t in zip(trials.all_found, trials.decoded, trials.answers, trials.length, trials.trial)
]
rows = []
for (method, length), part in trials.groupby(["method", "length"], sort=False):
    found, n = int(part.all_found.sum()), len(part)
    low, high = wilson_interval(found, n)
    rows.append(
        {
            "method": method,
            "length": length,
            "found": f"{found}/{n}",
            "rate": round(found / n, 3),
            "95% Wilson": f"{low:.2f}–{high:.2f}",
            "string_match_all": round(part.score.mean(), 3),
            "wrong: another key's value": int(part.distractor.sum()),
            "forwards / trial": round(part.forwards.mean(), 1),
            "seconds / trial": round(part.seconds.mean(), 1),
        }
    )
table = pd.DataFrame(rows).sort_values(["length", "method"])
pairs = mcnemar_pairs(trials, arm="method", trial="trial", passed="all_found", group="length")
# a folder of one method (a 1x control alone) has no pair to compare: no pairs table
for name, frame in (("ruler_table", table), ("ruler_pairs", pairs))[: 2 if len(pairs) else 1]:
    frame.to_csv(here / f"{name}.csv", index=False)
    (here / f"{name}.md").write_text(frame.to_markdown(index=False, floatfmt=".3g") + "\n")
    print(frame.to_markdown(index=False, floatfmt=".3g"), end="\n\n")
if replicated:
    print(f"{replicated} trials scored again by a later run decoded the same and count once")
