"""Exact match under teacher forcing is greedy decoding's exact match: the evaluation loop's
``exact_match`` equals an explicit greedy decode of every answer."""

import torch

from posenc.engine.evaluation import evaluate
from posenc.models.lm import CausalLM
from posenc.pe.rope import RoPE
from posenc.tasks.passkey import PasskeyTask


def greedy_exact(model: CausalLM, x: torch.Tensor, y: torch.Tensor, k: int) -> int:
    """Decode the last k tokens one at a time from the prompt, feeding back the model's own picks."""
    prompt = x[:, : x.shape[1] - k + 1]  # up to and including the first answer's input position
    out = prompt
    with torch.no_grad():
        for _ in range(k):
            nxt = model(out)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat((out, nxt), 1)
    return int((out[:, -k:] == y[:, -k:]).all(1).sum())


def test_teacher_forced_exact_match_equals_greedy_decoding():
    torch.manual_seed(0)
    task = PasskeyTask(key_length=2, n_filler=2, eval_size=3000)
    model = CausalLM(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, mlp_hidden=32, pe=RoPE(head_dim=8))
    # a short fit, so that the model gets some keys right and others wrong
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        xb, yb = task.train_batch(64, 9, g)
        loss = torch.nn.functional.cross_entropy(model(xb).flatten(0, 1), yb.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    x, y = task.eval_set(9, split="test")
    scores = evaluate(model, x, y, batch_size=500)
    expected = greedy_exact(model, x, y, task.key_length)
    assert 0 < expected < len(x)  # some right, some wrong: the comparison can fail
    assert scores["items"] == len(x) and round(scores["exact_match"] * len(x)) == expected
    # per-digit accuracy counts digits, not keys, and is higher than exact match here
    assert scores["accuracy"] > scores["exact_match"]
