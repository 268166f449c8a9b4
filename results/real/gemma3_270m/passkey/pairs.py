"""Unscaled against each scaling, trial by trial, from a passkey run's `passkey_trials.csv`
(default: this file's folder). Every scale reads the same prompts (one key and one depth per
trial), so at each length the trials of all depths pair up: the trials only one side found, the
exact McNemar p-value, and that p Holm-corrected over the table. Writes `pairs.md`/`.csv`.

    python results/real/gemma3_270m/passkey/pairs.py
"""

import sys
from pathlib import Path

import pandas as pd

from posenc.analysis.stats import mcnemar_pairs

here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
trials = pd.read_csv(here / "passkey_trials.csv")
pairs = mcnemar_pairs(trials, arm="scale", trial=["depth", "trial"], passed="correct", group="length", baseline="none")
pairs.to_csv(here / "pairs.csv", index=False)
(here / "pairs.md").write_text(pairs.to_markdown(index=False, floatfmt=".3g") + "\n")
print(pairs.to_markdown(index=False, floatfmt=".3g"))
