"""What the algorithmic tasks of Kazemnejad et al. 2023 share: a prompt, then its answer at the end.

"The Impact of Positional Encoding on Length Generalization in Transformers" (arXiv 2305.19466)
trains decoder-only models at short lengths and tests them on longer instances of addition,
sorting, summation and parity (beside copy and reverse: ``posenc.tasks.copy``), scored by exact
match of the whole answer. The paper writes each instance as words ("Compute: … ? The answer is
…"); posenc keeps the tokens that carry the problem and one separator before the answer, since the
fixed words carry no information and would only take positions.
"""

from __future__ import annotations

import torch


def prompt_then_answer(
    prompt: torch.Tensor, answer: torch.Tensor, seq_len: int, pad: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, p) prompt, ending in its separator, and (n, a) answer -> (n, s+1) tokens, left-padded
    with ``pad`` to ``seq_len + 1``, and the bool mask of exactly the answer tokens."""
    n, fill = prompt.shape[0], seq_len + 1 - prompt.shape[1] - answer.shape[1]
    if fill < 0:
        raise ValueError(f"{prompt.shape[1]} prompt and {answer.shape[1]} answer tokens exceed {seq_len + 1}")
    tokens = torch.cat((torch.full((n, fill), pad), prompt, answer), dim=1)  # (n, s+1)
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    mask[:, tokens.shape[1] - answer.shape[1] :] = True
    return tokens, mask
