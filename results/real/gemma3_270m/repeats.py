"""Which scored tail positions of the Gemma 3 window repeat earlier text: a position counts when
the 32 tokens before it occur earlier in the same window; prints, per length, how many of the last
1024 positions repeat and how far back the earlier copy starts (median, min, max).

    python results/real/gemma3_270m/repeats.py PATH/gemma-3-270m-Q4_K_M.gguf
"""

import statistics
import sys
from pathlib import Path

from transformers import AutoTokenizer

from posenc.experiments.real import documents, tokenize
from posenc.tasks.ruler.base import text_start

gguf = Path(sys.argv[1])
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
lead = text_start(tokenizer)
window = lead + tokenize(tokenizer, documents(None)).tolist()[: 65536 - len(lead)]
k, first = 32, {}
for i in range(k, len(window)):
    first.setdefault(tuple(window[i - k : i]), i)
for n in (4096, 8192, 16384, 32768, 49152, 65536):
    back = [i - first[tuple(window[i - k : i])] for i in range(n - 1024, n) if first[tuple(window[i - k : i])] < i]
    spread = f"{statistics.median(back):.0f} ({min(back)}-{max(back)}) tokens back" if back else ""
    print(f"{n}: {len(back)} of 1024 tail positions repeat earlier text {spread}")
