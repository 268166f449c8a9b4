"""Permutation test: how much a model's output changes when its input tokens are shuffled.

Self-attention without positions is permutation-equivariant (seed claim C1): with bidirectional
attention, f(Px) = P·f(x) for every permutation P of the tokens, so a pooled output does not
change at all. A causal mask already breaks this (claim C2), and so does every position scheme.

For K random permutations P of the s input tokens (or image patches) this measures

* pooled output (mean over tokens of a per-token output, or a classifier's logits): the max and
  mean |pool(f(Px)) − pool(f(x))| and the fraction of examples whose argmax changes;
* per-token output: the equivariance residual ‖f(Px) − P·f(x)‖ / ‖f(x)‖ (Frobenius over the
  batch) and the fraction of tokens whose argmax changes.

A classifier (``(b, C)`` logits) has no per-token output of its own; its last block's hidden
states are used, with prefix rows (a cls token) dropped from the front.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn


def permute_patches(images: torch.Tensor, perm: torch.Tensor, patch_size: int | tuple[int, int]) -> torch.Tensor:
    """Move the (p_h, p_w) patches of (b, c, H, W) images: output patch i is input patch perm[i].

    Patches are numbered in raster order, as a ViT's patch embedding flattens them.
    """
    ph, pw = (patch_size, patch_size) if isinstance(patch_size, int) else patch_size
    b, c, h, w = images.shape
    gh, gw = h // ph, w // pw
    patches = images.reshape(b, c, gh, ph, gw, pw).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c, ph, pw)
    patches = patches[:, perm]  # (b, gh·gw, c, p_h, p_w)
    return patches.reshape(b, gh, gw, c, ph, pw).permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w)


def num_tokens(model: nn.Module, x: torch.Tensor) -> int:
    """How many tokens (or patches) an input holds: s for (b, s) ids, the grid for images."""
    if x.dim() == 2:
        return x.shape[1]
    p = getattr(model, "patch_size", None)
    if p is None:
        raise TypeError(
            f"cannot tell the patches of a {tuple(x.shape)} input: {type(model).__name__} has no patch_size"
        )
    ph, pw = (p, p) if isinstance(p, int) else p
    return (x.shape[-2] // ph) * (x.shape[-1] // pw)


def permute_inputs(model: nn.Module, x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Apply one permutation of the tokens to a batch: (b, s) ids, or images by ``model.patch_size``."""
    if x.dim() == 2:
        return x[:, perm]
    return permute_patches(x, perm, model.patch_size)


@torch.no_grad()
def outputs(model: nn.Module, x: torch.Tensor, n_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(b, C) pooled output and (b, n_tokens, F) per-token output of one forward pass."""
    hidden = []
    blocks = getattr(model, "blocks", None)
    handle = None
    if blocks is not None and len(blocks):
        handle = blocks[-1].register_forward_hook(lambda mod, args, out: hidden.append(out))
    try:
        out = model(x)
    finally:
        if handle is not None:
            handle.remove()
    if out.dim() == 3:  # (b, s, V): a sequence model, its own output is per token
        return out.mean(1), out
    if not hidden:
        raise TypeError(
            f"{type(model).__name__} gives {tuple(out.shape)} outputs and has no blocks to read tokens from"
        )
    tokens = hidden[0]
    return out, tokens[:, tokens.shape[1] - n_tokens :]  # drop prefix rows (cls) in front


@dataclass
class PermutationScores:
    pooled_max_abs_delta: float
    pooled_mean_abs_delta: float
    pooled_pred_changed: float
    token_pred_changed: float
    equivariance_residual: float  # the largest over the K permutations

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@torch.no_grad()
def permutation_test(
    model: nn.Module, x: torch.Tensor, k: int, generator: torch.Generator, batch_size: int = 64
) -> PermutationScores:
    """K random permutations (one per round, shared by the batch) of the tokens of ``x``."""
    if k < 1:
        raise ValueError(f"need at least one permutation, got k={k}")
    was_training = model.training
    model.eval()
    n = num_tokens(model, x)
    device = next(model.parameters()).device
    max_d, sum_d, count_d, pooled_changed, token_changed, tokens_total, residual = 0.0, 0.0, 0, 0, 0, 0, 0.0
    try:
        for _ in range(k):
            perm = torch.randperm(n, generator=generator)
            num, den = 0.0, 0.0
            for i in range(0, len(x), batch_size):
                xb = x[i : i + batch_size].to(device)
                pooled, tokens = outputs(model, xb, n)
                pooled_p, tokens_p = outputs(model, permute_inputs(model, xb, perm.to(device)), n)
                delta = (pooled_p.double() - pooled.double()).abs()
                max_d = max(max_d, float(delta.max()))
                sum_d += float(delta.sum())
                count_d += delta.numel()
                pooled_changed += int((pooled_p.argmax(-1) != pooled.argmax(-1)).sum())
                moved = tokens[:, perm.to(device)]  # P·f(x): (b, n, F)
                num += float((tokens_p.double() - moved.double()).pow(2).sum())
                den += float(tokens.double().pow(2).sum())
                token_changed += int((tokens_p.argmax(-1) != moved.argmax(-1)).sum())
                tokens_total += tokens.shape[0] * tokens.shape[1]
            residual = max(residual, (num / max(den, 1e-300)) ** 0.5)
    finally:
        model.train(was_training)
    return PermutationScores(
        pooled_max_abs_delta=max_d,
        pooled_mean_abs_delta=sum_d / count_d,
        pooled_pred_changed=pooled_changed / (k * len(x)),
        token_pred_changed=token_changed / tokens_total,
        equivariance_residual=residual,
    )
