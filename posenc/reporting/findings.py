"""The reference suite's tables beside the published findings they mirror (``configs/findings.yaml``:
the ViT paper's position-embedding ablation, ALiBi, Position Interpolation, YaRN, RoPE-ViT, NoPE).

Each section states the published result with its citation, our numbers with their 95% intervals,
and an **Agrees:** verdict computed from the intervals (yes, partly, no) with the data file's
thresholds; where we disagree it adds the data file's reason, filled in with the suite's own
model, lengths and seeds. The papers' own subjects come from the data file; every other scheme in
a table takes part by what its class encodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from posenc.reporting.estimates import (
    ACCURACY_GAP,
    Estimate,
    accuracy,
    change,
    difference,
    estimate,
    paired,
    per_seed,
    select,
)
from posenc.reporting.literature import finding
from posenc.reporting.tables import (
    PASSKEY,
    RESOLUTION,
    TARGET,
    TEXT,
    Meta,
    Section,
    Tables,
    about,
    as_trained,
    controls,
    encoding,
    ext_table,
    lengths,
    md,
    missing,
    multiple,
    pixels,
    present,
    rise,
    rises,
    train_px,
)


def start(key: str) -> Section:
    entry = finding(key)
    return Section(key, entry.title, entry.cited())


def _vit_task(r: pd.DataFrame, paper: Any, sweep: str, meta: Meta) -> list[str]:
    """One task's ablation: accuracy at the training resolution per scheme, and the schemes'
    accuracies compared with the absolute ones, paired by seed."""
    px = train_px(r)
    at = select(r, finetune_steps=0)
    schemes = list(at["pe"].unique())
    acc = {pe: accuracy(at, px, pe=pe) for pe in schemes}
    seeds = {pe: per_seed(at, px, pe=pe) for pe in schemes}
    task = paper.subject("tasks").get(sweep, sweep)
    lines = [
        f"Ours, {task}, accuracy at the training resolution {px}: "
        + "; ".join(f"{pe} {e}" for pe, e in acc.items())
        + "."
    ]
    absolute, relative, blind = (encoding(schemes, what) for what in ("absolute", "relative", "nothing"))
    if not blind or not absolute:
        return lines

    def gaps(pe: str) -> dict[str, Estimate]:  # pe − each absolute scheme, paired by seed
        return {a: Estimate.paired(seeds[pe], seeds[a], ACCURACY_GAP) for a in absolute if a != pe}

    worse = all(g.verdict() == "lower" for b in blind for g in gaps(b).values())
    spread = max(acc[a].mean for a in absolute) - min(acc[a].mean for a in absolute)
    rel = {pe: gaps(pe) for pe in relative}
    behind = [pe for pe, g in rel.items() if g and all(x.verdict() == "lower" for x in g.values())]
    # a control of the sweep (a scheme that cannot express the label, with the suite's reason) is
    # named with its reason, not read as a relative scheme falling short of the published parity
    reasons = controls(meta).get(sweep, {})
    lagging = [pe for pe in behind if pe not in reasons]
    verdict = "yes" if worse and not lagging else "partly" if worse else "no"
    best = max(absolute, key=lambda a: acc[a].mean)
    compared = "; ".join(f"{pe} − {best} {g[best]}" for pe, g in rel.items() if best in g)
    relational = sweep != RESOLUTION.name
    lines.append(
        f"**Agrees:** {verdict} on {task} — "
        + (
            f"no PE is clearly worse: paired by seed, {', '.join(blind)} falls below every absolute scheme"
            if worse
            else f"no PE is not shown to be worse: paired by seed, {', '.join(blind)} does not fall below "
            "every absolute scheme"
        )
        + f"; the absolute schemes "
        f"({', '.join(absolute)}) are within {spread:.3g} of each other"
        + (f"; the relative ones against the best absolute, paired by seed: {compared}" if compared else "")
        + (
            f", and {', '.join(behind)} fall{'s' if len(behind) == 1 else ''} behind every absolute scheme"
            if behind
            else ""
        )
        + ". "
        + paper.say("relational_note" if relational else "task_note")
        + "".join(f" {pe} is a control of this task: {reasons[pe]}." for pe in behind if pe in reasons)
        + (
            ""
            if not lagging
            else " "
            + (
                paper.say("why_not_relational", **about(meta, sweep, r))
                if relational
                else paper.say("why_not_relative")
            )
        )
    )
    return lines


def vit_ablation(tables: Tables, meta: Meta) -> Section:
    """The ablation on the absolute task (``resolution``) and the relational one (``resolution_relational``)."""
    s, paper = start("ViT"), finding("ViT")
    tasks = paper.subject("tasks")
    for sweep in tasks:
        r = present(tables, sweep, everyone=True)  # whether a scheme can learn the task is what it measures
        if r is None:
            s.lines.append(f"Not measured on {tasks[sweep]}: the table `{sweep}` was not run.")
        else:
            s.lines += _vit_task(r, paper, sweep, meta)
    return s


def alibi(tables: Tables, meta: Meta) -> Section:
    s, paper = start("ALiBi"), finding("ALiBi")
    t = ext_table(tables)
    if t is None:
        s.lines = missing(tables, TEXT.name)
        return s
    d = {pe: rise(t, pe) for pe in as_trained(t)["pe"].unique()}
    s.lines = [
        f"Ours, rise in bits per byte from the training length to {multiple(t)} (no fine-tune): "
        + "; ".join(f"{pe} {e}" for pe, e in d.items())
        + "."
    ]
    subject = paper.subject("scheme")
    if subject in d:
        flat = not d[subject].above(paper.threshold("flat_bits"))
        rivals = [o for o in paper.subject("rivals") if o in d and d[o].n]
        gaps = {o: Estimate.paired(rises(t, subject), rises(t, o)) for o in rivals}  # subject − rival, per seed
        separated = [o for o in rivals if gaps[o].verdict() == "lower"]
        by_mean = [o for o in rivals if gaps[o].mean < 0 and o not in separated]
        verdict = (
            "yes" if flat and len(separated) == len(rivals) else "partly" if flat and (separated or by_mean) else "no"
        )
        beaten = ([f"{', '.join(separated)} (paired interval below 0)"] if separated else []) + (
            [f"{', '.join(by_mean)} by the mean only"] if by_mean else []
        )
        s.lines.append(
            f"**Agrees:** {verdict} — {subject} {'stays flat' if flat else 'does not stay flat'} (within "
            f"{paper.threshold('flat_bits'):g} bits of no change); paired by seed, its rise minus "
            + "; minus ".join(f"{o}'s {g}" for o, g in gaps.items())
            + "; it rises less than "
            + ("; ".join(beaten) if beaten else f"none of {', '.join(rivals)}")
            + "."
            + (
                ""
                if verdict == "yes"
                else " "
                + paper.say("why_not", train_length=lengths(t)[0], multiple=multiple(t), **about(meta, TEXT.name, t))
            )
        )
    return s


def _target(tables: Tables) -> tuple[pd.DataFrame, int] | None:
    """The fixed-factor table and its factor (``extrapolation.factor``), if the suite ran it."""
    t = present(tables, TARGET.name)
    if t is None or "extrapolation.factor" not in t:
        return None
    return t, int(float(t["extrapolation.factor"].iloc[0]))


def _spans(t: pd.DataFrame, factor: int) -> tuple[list[str], list[str]]:
    """Lengths within the target (L, factor·L] and beyond it."""
    ns = lengths(t)
    target = int(ns[0]) * factor
    return [n for n in ns if int(ns[0]) < int(n) <= target], [n for n in ns if int(n) > target]


def _span_estimate(t: pd.DataFrame, span: list[str], **where: Any) -> Estimate:
    """Over seeds: bits per byte averaged over the lengths of ``span``."""
    return Estimate.of(list(per_seed(t, span, metric="bpb", **where).values()))


def pi(tables: Tables, meta: Meta) -> Section:
    s, paper = start("PI"), finding("PI")
    t = ext_table(tables)
    if t is None:
        s.lines = missing(tables, TEXT.name)
        return s
    ns, rope, scale = lengths(t), paper.subject("scheme"), paper.subject("scale")
    raw_rows = select(as_trained(t), pe=rope, metric="bpb")
    none, pi_ = estimate(raw_rows, ns[-1]), estimate(t, ns[-1], pe=rope, scale=scale, metric="bpb")
    two_none, two_pi = estimate(raw_rows, ns[1]), estimate(t, ns[1], pe=rope, scale=scale, metric="bpb")
    gap = Estimate.paired(per_seed(t, ns[-1], pe=rope, scale=scale, metric="bpb"), per_seed(raw_rows, ns[-1]))
    better = gap.verdict() == "lower"
    s.lines = [
        f"Ours, {rope} bits per byte without fine-tune: at {ns[1]} unscaled {two_none}, {scale} {two_pi}; at "
        f"{ns[-1]} unscaled {none}, {scale} {pi_}."
    ]
    target, tuned, raw, lowered = _target(tables), None, None, None
    if target is not None:
        tt, factor = target
        steps = int(tt["finetune_steps"].max())
        within, _ = _spans(tt, factor)
        if steps and within:
            raw, tuned = (_span_estimate(tt, within, scale=scale, finetune_steps=ft) for ft in (0, steps))
            lowered = Estimate.paired(
                *(per_seed(tt, within, scale=scale, metric="bpb", finetune_steps=ft) for ft in (steps, 0))
            )  # after − before, per seed
            s.lines.append(
                f"With a fixed factor {factor} and {steps} fine-tune steps at each length, {scale} over "
                f"{within[0]}–{within[-1]} bytes: {raw} before, {tuned} after fine-tuning (the unscaled "
                f"model at its training length: {estimate(raw_rows, ns[0])})."
            )
    recovers = tuned is not None and lowered.verdict() == "lower"
    s.lines.append(
        f"**Agrees:** {'yes' if better else 'no'} on the untuned comparison — {scale} is "
        f"{'better' if better else 'not better'} than raw extrapolation at {multiple(t)} (paired by seed, "
        f"{scale} − unscaled {gap} bits per byte)"
        + (
            f"; and fine-tuning {'lowers' if recovers else 'does not lower'} {scale}'s loss within its target "
            f"(after − before, paired by seed: {lowered})."
            if tuned is not None
            else "."
        )
        + (
            ""
            if better
            else " " + paper.say("why_not", rise=str(rise(t, rope)), factor=multiple(t), **about(meta, TEXT.name, t))
        )
    )
    return s


RELATIONS: dict[str, Callable[[Estimate], bool]] = {  # on the paired difference first − second
    "<": lambda g: g.mean < 0,
    "≈": lambda g: g.holds(0),
    "≲": lambda g: g.mean <= 0 or g.holds(0),
    "≪": lambda g: g.below(0),
}


def yarn(tables: Tables, meta: Meta) -> Section:
    s, paper = start("YaRN"), finding("YaRN")
    target = _target(tables)
    if target is None:
        s.lines = missing(tables, TARGET.name)
        return s
    t, factor = target
    spans = dict(zip(("within", "beyond"), _spans(t, factor)))
    steps = sorted(int(x) for x in t["finetune_steps"].dropna().unique())
    scales, ft = list(t["scale"].unique()), steps[-1]
    heads = {name: f"{name} ({span[0]}–{span[-1]})" if span else f"{name} (—)" for name, span in spans.items()}
    rows = [
        {
            "scale": sc,
            "fine-tune steps": st,
            **{heads[name]: str(_span_estimate(t, span, scale=sc, finetune_steps=st)) for name, span in spans.items()},
        }
        for st in steps
        for sc in scales
    ]
    # every rescaling scores the same trained model of a seed: compare them paired by seed
    when = {"within": ft, "beyond": 0}
    gaps, agrees = [], {}
    for name, pairs in paper.order.items():
        oks = []
        for a, rel, b in pairs:
            rows_a, rows_b = (select(t, scale=sc, finetune_steps=when[name], metric="bpb") for sc in (a, b))
            g = paired(rows_a, rows_b, spans[name]) if spans[name] and len(rows_a) and len(rows_b) else Estimate.of([])
            gaps.append(f"{name} {a} − {b} {g} (published {a} {rel} {b})")
            oks.append(g.n > 0 and RELATIONS[rel](g))
        agrees[name] = all(oks)
    ranked = {
        name: sorted(scales, key=lambda sc: _span_estimate(t, spans[name], scale=sc, finetune_steps=when[name]).mean)
        for name in spans
    }
    s.lines = [
        f"Ours: {', '.join(t['pe'].unique())} trained at {lengths(t)[0]} bytes, every "
        f"rescaling at a fixed factor {factor} (target "
        f"{int(lengths(t)[0]) * factor}), bits per byte averaged over the lengths within and beyond the target "
        "(`suite/extrapolation_target.csv`):",
        "",
        md(pd.DataFrame(rows)),
        "",
        f"Within the target after {ft} fine-tune steps: {' < '.join(ranked['within'])}; beyond it "
        f"without fine-tune: {' < '.join(ranked['beyond'])}.",
        "Paired by seed (the same trained model under each rescaling), in bits per byte: " + "; ".join(gaps) + ".",
        "**Agrees:** "
        + ", ".join(
            f"{'within the target' if n == 'within' else 'beyond it'} {'yes' if ok else 'no'}"
            for n, ok in agrees.items()
        )
        + "."
        + ("" if all(agrees.values()) else " " + paper.say("why_not", steps=str(ft), **about(meta, TARGET.name, t))),
    ]
    return s


def rope_vit(tables: Tables, meta: Meta) -> Section:
    s, paper = start("RoPE-ViT"), finding("RoPE-ViT")
    r = present(tables, RESOLUTION.name)
    if r is None:
        s.lines = missing(tables, RESOLUTION.name)
        return s
    px, cols = train_px(r), pixels(r)
    higher = [c for c in cols if int(c[:-2]) > int(px[:-2])]
    untuned = r[r["finetune_steps"] == 0]
    placed = untuned[~untuned["pe"].isin(encoding(untuned["pe"].unique(), "nothing"))]
    rows = [
        {
            "pe": pe,
            "method": m,
            px: str(accuracy(p, px)),
            **{c: str(difference(p, c, px, ACCURACY_GAP)) for c in higher},
        }
        for (pe, m), p in placed.groupby(["pe", "method"], sort=False)
    ]
    s.lines = [
        "Ours, accuracy at the training resolution and its change at higher ones (no fine-tune):",
        "",
        md(pd.DataFrame(rows)),
        "",
    ]
    sub = paper.subjects
    if higher and rows:
        arms = [select(untuned, pe=sub[k], method=sub[f"{k}_method"]) for k in ("table", "rotary")]
        ape, mixed = (difference(a, higher[-1], px, ACCURACY_GAP) for a in arms)
        gap = Estimate.paired(*(change(a, higher[-1], px) for a in arms), bounds=(-2.0, 2.0))  # table − rotary
        agrees = gap.verdict() == "lower"
        s.lines.append(
            f"**Agrees:** {'yes' if agrees else 'no'} — at {higher[-1]} the interpolated {sub['table']} table "
            f"({sub['table_method']}) changes by {ape}, {sub['rotary']} ({sub['rotary_method']}) by {mixed}; "
            f"paired by seed, the table's change minus {sub['rotary']}'s is {gap} ({gap.verdict()})."
            + ("" if agrees else " " + paper.say("why_not"))
        )
    return s


def nope(tables: Tables, meta: Meta) -> Section:
    s, paper = start("NoPE"), finding("NoPE")
    t, p = ext_table(tables), ext_table(tables, PASSKEY.name)
    if t is None and p is None:
        s.lines = missing(tables, PASSKEY.name)
        return s
    subject, lines = paper.subject("scheme"), []
    if p is not None:
        ns, plain = lengths(p), select(as_trained(p), metric="accuracy")
        acc = {pe: accuracy(plain, ns[-1], pe=pe) for pe in plain["pe"].unique()}
        at_l = {pe: accuracy(plain, ns[0], pe=pe) for pe in acc}
        lines.append(
            f"Passkey accuracy at {ns[0]} → {ns[-1]} tokens (no rescaling): "
            + "; ".join(f"{pe} {at_l[pe]} → {acc[pe]}" for pe in acc)
            + "."
        )
        ranked = sorted((pe for pe in acc if acc[pe].n), key=lambda pe: -acc[pe].mean)
        if subject in ranked:
            gaps = {
                pe: Estimate.paired(per_seed(plain, ns[-1], pe=subject), per_seed(plain, ns[-1], pe=pe), ACCURACY_GAP)
                for pe in ranked
                if pe != subject
            }  # subject − pe, paired by seed
            beats = [pe for pe, g in gaps.items() if g.verdict() == "higher"]
            ties = [pe for pe in gaps if pe not in beats]
            first = ranked[0] == subject
            verdict = "yes" if first and not ties else "partly" if first else "no"
            lines.append(
                f"**Agrees:** {verdict} — at {ns[-1]} tokens {subject} ranks {ranked.index(subject) + 1} of "
                f"{len(ranked)} by mean accuracy; paired by seed, {subject} − "
                + "; ".join(f"{pe} {g}" for pe, g in gaps.items())
                + f": it is above "
                f"{', '.join(beats) or 'no other scheme'}"
                + (f", with no difference shown from {', '.join(ties)}" if ties else "")
                + "."
                + ("" if verdict == "yes" else " " + paper.say("why_not", **about(meta, PASSKEY.name, p)))
            )
    if t is not None:
        rivals = {pe: rise(t, pe) for pe in as_trained(t)["pe"].unique() if pe != subject}
        lines.append(
            f"Text: {subject} rises by {rise(t, subject)} bits per byte at {multiple(t)}; "
            + ", ".join(f"{pe} by {e}" for pe, e in rivals.items() if e.n)
            + "."
        )
    s.lines = lines
    return s


FINDINGS: tuple[Callable[[Tables, Meta], Section], ...] = (vit_ablation, alibi, pi, yarn, rope_vit, nope)
