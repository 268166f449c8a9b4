"""The reference suite's tables beside the published findings they mirror: the ViT paper's
position-embedding ablation, ALiBi, Position Interpolation, YaRN, RoPE-ViT and NoPE.

Each section states the published result, our numbers with their 95% intervals, and an
**Agrees:** verdict computed from the intervals (yes, partly, no); where tiny scale disagrees it
says why we think it does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from posenc.reporting.claims import (
    Estimate, Section, Tables, completed, difference, estimate, ext_table, lengths, md, missing, multiple, pixels,
    rise, select, train_px,
)


def vit_ablation(tables: Tables) -> Section:
    s = Section("ViT", "Dosovitskiy et al. 2021, position-embedding ablation",
                "Published: no position embedding is clearly worse; 1D, 2D and relative embeddings are about equal.")
    r = completed(tables.get("resolution"))
    if r is None or not len(r):
        s.lines = missing("resolution")
        return s
    px = train_px(r)
    at = r[r["finetune_steps"] == 0].groupby(["pe", "seed"], sort=False)[px].first().reset_index()
    ests = {pe: estimate(p, px) for pe, p in at.groupby("pe", sort=False)}
    s.lines = [f"Ours, accuracy at the training resolution {px}: " + "; ".join(f"{pe} {e}" for pe, e in ests.items()) + "."]
    absolute = {pe: e for pe, e in ests.items() if pe in ("learned", "learned2d", "sincos2d")}
    relative = {pe: e for pe, e in ests.items() if pe in ("rel2d", "alibi2d")}
    if "nope" in ests and absolute:
        worse = all(ests["nope"].below(e.low if not math.isnan(e.low) else e.mean) for e in absolute.values())
        spread = max(e.mean for e in absolute.values()) - min(e.mean for e in absolute.values())
        rel_ok = all(not e.below(min(a.low for a in absolute.values())) for e in relative.values())
        verdict = "yes" if worse and rel_ok else "partly" if worse else "no"
        s.lines.append(
            f"**Agrees:** {verdict} — no PE is {'clearly' if worse else 'not clearly'} worse; the absolute 1D and 2D "
            f"tables are within {spread:.3g} of each other"
            + ("" if rel_ok else f", but the relative scheme ({', '.join(f'{pe} {e}' for pe, e in relative.items())}) "
               "falls with no PE")
            + ". Our label is the quadrant of a shape, a purely positional and absolute task: without positions the "
            "model falls to chance instead of losing a few points as on ImageNet, where content carries most of the "
            "label" + ("" if rel_ok else ", and a bias that depends only on offsets is translation-invariant, so it "
                       "cannot say where a shape is either (the ViT paper's relative variant also had the cls token "
                       "and a content-rich task to lean on)") + ".")
    return s


def alibi(tables: Tables) -> Section:
    s = Section("ALiBi", "Press et al. 2022, train short, test long",
                "Published: ALiBi's perplexity stays flat (even improves) far past the training length, where sinusoidal "
                "and RoPE models degrade.")
    t = ext_table(tables)
    if t is None:
        s.lines = missing("extrapolation_text")
        return s
    d = {pe: rise(t, pe) for pe in ("alibi", "sinusoidal", "rope", "t5", "kerple", "nope") if len(select(t, pe=pe))}
    s.lines = [f"Ours, rise in bits per byte from the training length to {multiple(t)} (no fine-tune): "
               + "; ".join(f"{pe} {e}" for pe, e in d.items()) + "."]
    if "alibi" in d:
        flat = not d["alibi"].above(0.02)  # within 0.02 bits of no change, or better
        rivals = [o for o in ("sinusoidal", "rope") if o in d and d[o].n]
        separated = [o for o in rivals if d["alibi"].below(d[o].low if not math.isnan(d[o].low) else d[o].mean)]
        by_mean = [o for o in rivals if d["alibi"].mean < d[o].mean and o not in separated]
        verdict = "yes" if flat and len(separated) == len(rivals) else "partly" if flat and (separated or by_mean) else "no"
        s.lines.append(
            f"**Agrees:** {verdict} — ALiBi {'stays flat' if flat else 'does not stay flat'}; it rises less than "
            + "; ".join(([f"{', '.join(separated)} with separated intervals"] if separated else [])
                        + ([f"{', '.join(by_mean)} by the mean only"] if by_mean else []))
            + ("" if separated or by_mean else "neither sinusoidal nor RoPE") + "."
            + ("" if verdict == "yes" else f" A tiny model trained at {lengths(t)[0]} bytes attends mostly to its "
               f"last few bytes, so even the schemes that ALiBi beats degrade only a little at {multiple(t)}; three "
               "seeds cannot separate differences of a few hundredths of a bit."))
    return s


def _target(tables: Tables) -> tuple[pd.DataFrame, int] | None:
    """The fixed-factor RoPE table and its factor (``extrapolation.factor``), if the suite ran it."""
    t = completed(tables.get("extrapolation_target"))
    if t is None or not len(t) or "extrapolation.factor" not in t:
        return None
    return t, int(float(t["extrapolation.factor"].iloc[0]))


def _spans(t: pd.DataFrame, factor: int) -> tuple[list[str], list[str]]:
    """Lengths within the target (L, factor·L] and beyond it."""
    ns = lengths(t)
    target = int(ns[0]) * factor
    return [n for n in ns if int(ns[0]) < int(n) <= target], [n for n in ns if int(n) > target]


def _span_estimate(t: pd.DataFrame, span: list[str], **where: Any) -> Estimate:
    """Over seeds: bits per byte averaged over the lengths of ``span``."""
    part = select(t, metric="bpb", **where)
    if not span or not len(part):
        return Estimate.of([])
    return Estimate.of(part.groupby("seed")[span].mean().mean(axis=1).dropna().tolist())


def pi(tables: Tables) -> Section:
    s = Section("PI", "Chen et al. 2023, Position Interpolation",
                "Published: extrapolating RoPE past L explodes; interpolating positions (÷ factor) stays usable, and a "
                "short fine-tune (~1000 steps) brings the long-context perplexity down to the short one.")
    t = ext_table(tables)
    if t is None:
        s.lines = missing("extrapolation_text")
        return s
    ns = lengths(t)
    none, pi_ = (estimate(t, ns[-1], pe="rope", scale=sc, metric="bpb") for sc in ("none", "pi"))
    two_none, two_pi = (estimate(t, ns[1], pe="rope", scale=sc, metric="bpb") for sc in ("none", "pi"))
    better = pi_.below(none.low if not math.isnan(none.low) else none.mean)
    s.lines = [f"Ours, RoPE bits per byte without fine-tune: at {ns[1]} none {two_none}, PI {two_pi}; at {ns[-1]} none "
               f"{none}, PI {pi_}."]
    target = _target(tables)
    tuned = None
    if target is not None:
        tt, factor = target
        steps = int(tt["finetune_steps"].max())
        within, _ = _spans(tt, factor)
        if steps and within:
            at_l = estimate(t, lengths(t)[0], pe="rope", scale="none", metric="bpb")
            raw, tuned = (_span_estimate(tt, within, scale="pi", finetune_steps=ft) for ft in (0, steps))
            s.lines.append(f"With a fixed factor {factor} and {steps} fine-tune steps at each length, PI over "
                           f"{within[0]}–{within[-1]} bytes: {raw} before, {tuned} after fine-tuning (the unscaled "
                           f"model at its training length: {at_l}).")
    recovers = tuned is not None and raw.mean > tuned.mean
    s.lines.append(f"**Agrees:** {'yes' if better else 'no'} on the untuned comparison — PI is "
                   f"{'better' if better else 'not better'} than raw extrapolation at {multiple(t)}"
                   + (f"; and fine-tuning {'lowers' if recovers else 'does not lower'} PI's loss within its target."
                      if tuned is not None else ".")
                   + ("" if better else f" Raw extrapolation does not explode here (it rises by {rise(t, 'rope')} "
                      "bits per byte), because a tiny byte-level model leans on the last few bytes. Without the "
                      "fine-tune that PI's paper relies on, compressing "
                      f"positions by {multiple(t)[:-1]} crowds neighbouring tokens into angles the model never had to "
                      "tell apart (our models are tiny and briefly trained); the paper's models start from billions of "
                      "tokens, where the low frequencies that PI compresses carry less of the local order."))
    return s


def yarn(tables: Tables) -> Section:
    s = Section("YaRN", "Peng et al. 2023, ordering of the RoPE rescalings",
                "Published: within the target length PI ≈ YaRN < NTK in perplexity; beyond it YaRN ≲ NTK ≪ PI.")
    target = _target(tables)
    if target is None:
        s.lines = missing("extrapolation_target")
        return s
    t, factor = target
    within, beyond = _spans(t, factor)
    steps = sorted(int(x) for x in t["finetune_steps"].dropna().unique())
    rows = []
    est: dict[tuple[str, int, str], Estimate] = {}
    for ft in steps:
        for sc in ("pi", "ntk", "yarn"):
            for name, span in (("within", within), ("beyond", beyond)):
                est[sc, ft, name] = _span_estimate(t, span, scale=sc, finetune_steps=ft)
            rows.append({"scale": sc, "fine-tune steps": ft, f"within ({within[0] if within else '—'}–"
                         f"{within[-1] if within else '—'})": str(est[sc, ft, "within"]),
                         f"beyond ({beyond[0] if beyond else '—'}–{beyond[-1] if beyond else '—'})":
                         str(est[sc, ft, "beyond"])})
    ft = steps[-1]
    w = {sc: est[sc, ft, "within"] for sc in ("pi", "ntk", "yarn")}
    b = {sc: est[sc, 0, "beyond"] for sc in ("pi", "ntk", "yarn")}
    # every rescaling scores the same trained model of a seed: compare them paired by seed
    def gap(a: str, b: str, span: list[str], ft: int) -> Estimate:
        pa, pb = (select(t, scale=sc, finetune_steps=ft, metric="bpb").set_index("seed")[span].mean(axis=1)
                  for sc in (a, b))
        return Estimate.of((pa - pb).dropna().tolist())

    def same(e: Estimate) -> bool:
        return not e.above(0) and not e.below(0)

    pi_ntk, yarn_ntk, pi_yarn = gap("pi", "ntk", within, ft), gap("yarn", "ntk", within, ft), gap("pi", "yarn", within, ft)
    b_yarn_ntk, b_pi_ntk = gap("yarn", "ntk", beyond, 0), gap("pi", "ntk", beyond, 0)
    within_ok = pi_ntk.mean < 0 and yarn_ntk.mean < 0 and same(pi_yarn)
    beyond_ok = (b_yarn_ntk.mean <= 0 or same(b_yarn_ntk)) and b_pi_ntk.above(0)
    gaps = (f"Paired by seed (the same trained model under each rescaling), in bits per byte: within the target "
            f"PI − NTK {pi_ntk}, YaRN − NTK {yarn_ntk}, PI − YaRN {pi_yarn}; beyond it YaRN − NTK {b_yarn_ntk}, "
            f"PI − NTK {b_pi_ntk}.")
    s.lines = [f"Ours: RoPE trained at {lengths(t)[0]} bytes, every rescaling at a fixed factor {factor} (target "
               f"{int(lengths(t)[0]) * factor}), bits per byte averaged over the lengths within and beyond the target "
               "(`suite/extrapolation_target.csv`):", "", md(pd.DataFrame(rows)), "",
               f"Within the target after {ft} fine-tune steps: {' < '.join(sorted(w, key=lambda k: w[k].mean))}; beyond it "
               f"without fine-tune: {' < '.join(sorted(b, key=lambda k: b[k].mean))}.", gaps,
               f"**Agrees:** within the target {'yes' if within_ok else 'no'}, beyond it {'yes' if beyond_ok else 'no'}."
               + ("" if within_ok and beyond_ok else
                  " Our fine-tune is a few dozen steps of a tiny model whose heads have few frequency pairs; YaRN's ramp "
                  "(β = 32, 1) leaves most of them either fully interpolated or untouched, so YaRN sits close to PI or "
                  "to NTK rather than between them as with the 64 pairs of a Llama head.")]
    return s


def rope_vit(tables: Tables) -> Section:
    s = Section("RoPE-ViT", "Heo et al. 2024, multi-resolution",
                "Published: an interpolated absolute table loses accuracy at higher resolution; RoPE-Mixed holds or gains.")
    r = completed(tables.get("resolution"))
    if r is None or not len(r):
        s.lines = missing("resolution")
        return s
    px, cols = train_px(r), pixels(r)
    higher = [c for c in cols if int(c[:-2]) > int(px[:-2])]
    rows = []
    for pe, m in (("learned", "bicubic"), ("learned2d", "bicubic"), ("sincos2d", "bicubic"),
                  ("rope2d_axial", "extrapolate"), ("rope2d_mixed", "extrapolate"), ("rope2d_mixed", "interpolate")):
        p = select(r, pe=pe, method=m, finetune_steps=0)
        if len(p):
            rows.append({"pe": pe, "method": m, px: str(estimate(p, px)),
                         **{c: str(difference(p, c, px)) for c in higher}})
    s.lines = [f"Ours, accuracy at the training resolution and its change at higher ones (no fine-tune):", "",
               md(pd.DataFrame(rows)), ""]
    if higher and rows:
        ape = difference(select(r, pe="learned", method="bicubic", finetune_steps=0), higher[-1], px)
        mixed = difference(select(r, pe="rope2d_mixed", method="extrapolate", finetune_steps=0), higher[-1], px)
        agrees = ape.mean < mixed.mean
        s.lines.append(f"**Agrees:** {'yes' if agrees else 'no'} — at {higher[-1]} the interpolated table changes by "
                       f"{ape}, RoPE-Mixed with raw coordinates by {mixed}."
                       + ("" if agrees else " Our grids have a few patches per side and the label (quadrant) is coarse, "
                          "so a resampled table still points to the right quadrant; RoPE-Mixed's learned frequencies, "
                          "trained on those few positions per axis, meet angles they never saw at twice the grid."))
    return s


def nope(tables: Tables) -> Section:
    s = Section("NoPE", "Kazemnejad et al. 2023, length generalization without positions",
                "Published: a decoder-only model without position encoding generalizes to longer inputs better than "
                "absolute, T5, ALiBi or RoPE encodings on synthetic tasks.")
    t, p = ext_table(tables), ext_table(tables, "extrapolation_passkey")
    if t is None and p is None:
        s.lines = missing("extrapolation_passkey")
        return s
    lines = []
    if p is not None:
        ns = lengths(p)
        acc = {pe: estimate(p, ns[-1], pe=pe, scale="none", metric="accuracy") for pe in p["pe"].unique()}
        at_l = {pe: estimate(p, ns[0], pe=pe, scale="none", metric="accuracy") for pe in p["pe"].unique()}
        lines.append(f"Passkey accuracy at {ns[0]} → {ns[-1]} tokens (no rescaling): "
                     + "; ".join(f"{pe} {at_l[pe]} → {acc[pe]}" for pe in acc) + ".")
        ranked = sorted((pe for pe in acc if acc[pe].n), key=lambda pe: -acc[pe].mean)
        if "nope" in ranked:
            n_low = acc["nope"].low if not math.isnan(acc["nope"].low) else acc["nope"].mean
            beats = [pe for pe in ranked if pe != "nope" and acc[pe].below(n_low)]
            ties = [pe for pe in ranked if pe not in beats and pe != "nope"]
            first = ranked[0] == "nope"
            verdict = "yes" if first and not ties else "partly" if first else "no"
            lines.append(f"**Agrees:** {verdict} — at {ns[-1]} tokens NoPE ranks {ranked.index('nope') + 1} of "
                         f"{len(ranked)} by mean accuracy; its interval lies above {', '.join(beats) or 'no other scheme'}"
                         + (f" and overlaps {', '.join(ties)}" if ties else "") + "."
                         + ("" if verdict == "yes" else " Kazemnejad et al. train each task to convergence; our models "
                            "stop after a few hundred steps, where what a scheme has learned at L limits what it can "
                            "carry further, and three seeds leave wide intervals."))
    if t is not None:
        lines.append(f"Text: NoPE rises by {rise(t, 'nope')} bits per byte at {multiple(t)}, RoPE by {rise(t, 'rope')}.")
    s.lines = lines
    return s


FINDINGS: tuple[Callable[[Tables], Section], ...] = (vit_ablation, alibi, pi, yarn, rope_vit, nope)
