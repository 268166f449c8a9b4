"""Peak RSS of evaluating one long validation window, per 1D position scheme.

Each (scheme, length) runs in a fresh Python process, so ``ru_maxrss`` is that evaluation's own
peak: the default model (configs/model/lm_tiny.yaml) at its initialisation, batch 1, on the
first validation window of the built-in corpus, through ``posenc.evaluation.evaluate``.

    OMP_NUM_THREADS=1 python benchmarks/long_eval_memory.py --lengths 4096,16384
    OMP_NUM_THREADS=1 python benchmarks/long_eval_memory.py --lengths 4096 --pe alibi --bias-chunk 4096  # full bias
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

SCHEMES = ("nope", "learned", "sinusoidal", "rope", "xpos", "relative", "t5", "alibi", "kerple", "fire")

CHILD = """
import json, resource, sys, time
import torch
from posenc.build import build
from posenc.config import compose
from posenc.evaluation import evaluate
pe, length, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3]
overrides = [f"pe={pe}"] + ([f"pe.max_len={length}"] if pe == "learned" else [])
overrides += [f"+model.bias_chunk={chunk}"] if chunk != "auto" else []
setup = build(compose(overrides))
inputs, targets = setup.task.eval_windows(length, 1)
start = time.perf_counter()
scores = evaluate(setup.model, inputs, targets, batch_size=1)
print(json.dumps({"pe": pe, "length": length, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - start, "loss": scores["loss"]}))
"""


def measure(pe: str, length: int, bias_chunk: str = "auto") -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, pe, str(length), bias_chunk], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="4096,16384")
    parser.add_argument("--pe", default=",".join(SCHEMES))
    parser.add_argument("--bias-chunk", default="auto", help="queries per chunk for bias schemes (the length: one full bias)")
    args = parser.parse_args()
    print("| pe | length | peak RSS (MiB) | seconds |")
    print("|---|---:|---:|---:|")
    for pe in args.pe.split(","):
        for length in map(int, args.lengths.split(",")):
            r = measure(pe, length, args.bias_chunk)
            print(f"| {r['pe']} | {r['length']} | {r['peak_rss_mib']:.0f} | {r['seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
