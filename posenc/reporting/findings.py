"""The reference suite's tables beside the published findings they mirror (``configs/findings.yaml``:
the ViT paper's position-embedding ablation, ALiBi, Position Interpolation, YaRN, RoPE-ViT, NoPE).

Each section states the published result with its citation, our numbers with their 95% intervals,
and a **Verdict:** — agrees, disagrees or inconclusive — from a family of tests on paired-by-seed
differences, corrected together (``posenc.reporting.estimates.Family``), with the data file's
equivalence margins and the paper's effects beside each test's minimum detectable effect; where
the verdict is not "agrees" it adds the data file's reason, filled in with the suite's own model,
lengths and seeds. The papers' own subjects come from the data file; every other scheme in
a table takes part by what its class encodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from posenc.analysis.stats import outside_margin, tost
from posenc.reporting.estimates import (
    ACCURACY_GAP,
    AGREES,
    DISAGREES,
    INCONCLUSIVE,
    Estimate,
    Family,
    Test,
    accuracy,
    change,
    difference,
    estimate,
    items,
    per_seed,
    select,
)
from posenc.reporting.literature import finding
from posenc.reporting.tables import (
    ALGORITHMIC,
    PASSKEY,
    RESOLUTION,
    TARGET,
    TEXT,
    Meta,
    Section,
    Tables,
    about,
    as_trained,
    chance_levels,
    chance_words,
    controls,
    encoding,
    ext_table,
    lengths,
    md,
    missing,
    multiple,
    pixels,
    present,
    primary_metric,
    ranking,
    rise,
    rises,
    train_px,
    unigram_baseline,
)


def start(key: str) -> Section:
    entry = finding(key)
    return Section(key, entry.title, entry.cited())


def _vit_task(r: pd.DataFrame, paper: Any, sweep: str, meta: Meta) -> tuple[list[str], Family | None]:
    """One task's ablation: accuracy at the training resolution per scheme; the family of tests
    (paired by seed): no PE below every absolute scheme, the absolute schemes about equal to each
    other, and each relative scheme (the controls apart) about equal to each absolute one."""
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
        return lines, None
    reasons = controls(meta).get(sweep, {})  # schemes that cannot express the label, with the suite's reason
    margin, n_items = paper.margin("equal_accuracy"), items(at)

    def test(a: str, relation: str, b: str) -> Test:
        effect = paper.effect("worse") if relation == "<" else None
        return Test.of(f"{a} − {b}", relation, seeds[a], seeds[b], margin, ACCURACY_GAP, effect=effect, items=n_items)

    tests = [test(pe, "<", a) for pe in blind for a in absolute]
    tests += [test(a, "≈", b) for i, a in enumerate(absolute) for b in absolute[i + 1 :]]
    tests += [test(pe, "≈", a) for pe in relative if pe not in reasons for a in absolute]
    family = Family(f"ViT, {task}", tests, model=about(meta, sweep, r)["model"])
    outcomes = dict(zip((t.name for t in tests), family.outcomes()))
    short = [pe for pe in relative if pe not in reasons and any(outcomes[f"{pe} − {a}"] == DISAGREES for a in absolute)]
    lines += [
        f"**Verdict:** {family.verdict} on {task} ({family.counts()}; {family.correction_words()}): no PE "
        "below every absolute scheme, and the schemes that can express the label about equal (within "
        f"±{margin:g}), paired by seed:",
        *family.lines(),
        paper.say("relational_note" if sweep != RESOLUTION.name else "task_note")
        + "".join(f" {pe} is a control of this task, not tested: {reasons[pe]}." for pe in relative if pe in reasons)
        + (
            " "
            + (
                paper.say("why_not_relational", **about(meta, sweep, r))
                if sweep != RESOLUTION.name
                else paper.say("why_not_relative")
            )
            if short
            else ""
        )
        + (" " + paper.say("why_inconclusive", **about(meta, sweep, r)) if family.verdict == INCONCLUSIVE else ""),
    ]
    return lines, family


def vit_ablation(tables: Tables, meta: Meta) -> Section:
    """The ablation on the absolute task (``resolution``) and the relational one (``resolution_relational``)."""
    s, paper = start("ViT"), finding("ViT")
    tasks = paper.subject("tasks")
    for sweep in tasks:
        r = present(tables, sweep, everyone=True)  # whether a scheme can learn the task is what it measures
        if r is None:
            s.lines.append(f"Not measured on {tasks[sweep]}: the table `{sweep}` was not run.")
        else:
            lines, family = _vit_task(r, paper, sweep, meta)
            s.lines += lines
            s.families += [family] if family is not None else []
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
        margin, ns = paper.margin("flat_bits"), lengths(t)
        own = rises(t, subject)
        zero = dict.fromkeys(own, 0.0)
        rivals = [o for o in paper.subject("rivals") if o in d and d[o].n]
        tests = [Test.of(f"{subject}'s rise", "≲", own, zero, margin)]
        tests += [Test.of(f"{subject}'s rise − {o}'s", "<", own, rises(t, o)) for o in rivals]
        family = Family("ALiBi", tests, model=about(meta, TEXT.name, t)["model"])
        s.families.append(family)
        flat = tost(list(own.values()), margin) < family.alpha
        fall = outside_margin(list(own.values()), margin) < family.alpha and d[subject].mean < 0
        shape = (
            f"stays flat (its rise is shown inside ±{margin:g} bits by TOST)"
            if flat
            else f"improves (its rise {d[subject]} is shown below −{margin:g})"
            if fall
            else f"is not shown to stay flat within ±{margin:g} bits"
        )
        s.lines += [
            f"**Verdict:** {family.verdict} ({family.counts()}; {family.correction_words()}) — from {ns[0]} to "
            f"{ns[-1]} {subject} {shape}; the published claim is that it does not rise and rises less than "
            f"{', '.join(rivals)}, paired by seed:",
            *family.lines(),
        ]
        if family.verdict != AGREES:
            s.lines.append(paper.say("why_not", train_length=ns[0], multiple=multiple(t), **about(meta, TEXT.name, t)))
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
    raw_rows = select(as_trained(t), metric="bpb")
    none, pi_ = estimate(raw_rows, ns[-1], pe=rope), estimate(t, ns[-1], pe=rope, scale=scale, metric="bpb")
    two_none, two_pi = estimate(raw_rows, ns[1], pe=rope), estimate(t, ns[1], pe=rope, scale=scale, metric="bpb")
    s.lines = [
        f"Ours, {rope} bits per byte without fine-tune: at {ns[1]} unscaled {two_none}, {scale} {two_pi}; at "
        f"{ns[-1]} unscaled {none}, {scale} {pi_}."
    ]
    tests = [
        Test.of(
            f"{scale} − unscaled at {ns[-1]}, untuned",
            "<",
            per_seed(t, ns[-1], pe=rope, scale=scale, metric="bpb"),
            per_seed(raw_rows, ns[-1], pe=rope),
        )
    ]
    keys = ext_table(tables, PASSKEY.name)
    if keys is not None and len(select(keys, pe=rope, scale=scale)):
        metric, far = primary_metric(keys), lengths(keys)[-1]
        tests.append(
            Test.of(
                f"{scale} − unscaled passkey {metric.replace('_', ' ')} at {far} tokens, untuned",
                ">",
                per_seed(select(keys, pe=rope, scale=scale, metric=metric), far),
                per_seed(select(as_trained(keys), pe=rope, metric=metric), far),
                bounds=ACCURACY_GAP,
                items=items(keys),
            )
        )  # retrieval: the effective context the paper's claim is about
    target = _target(tables)
    if target is not None:
        tt, factor = target
        steps = int(tt["finetune_steps"].max())
        within, _ = _spans(tt, factor)
        if steps and within:
            raw, tuned = (_span_estimate(tt, within, scale=scale, finetune_steps=ft) for ft in (0, steps))
            tests.append(
                Test.of(
                    f"{scale} after − before {steps} fine-tune steps over {within[0]}–{within[-1]}",
                    "<",
                    *(per_seed(tt, within, scale=scale, metric="bpb", finetune_steps=ft) for ft in (steps, 0)),
                )
            )
            s.lines.append(
                f"With a fixed factor {factor} and {steps} fine-tune steps at each length, {scale} over "
                f"{within[0]}–{within[-1]} bytes: {raw} before, {tuned} after fine-tuning (the unscaled "
                f"model at its training length: {estimate(raw_rows, ns[0], pe=rope)})."
            )
    family = Family("PI", tests, model=about(meta, TEXT.name, t)["model"])
    s.families.append(family)
    unigram = unigram_baseline(t)
    words = dict(scheme=rope, bpb=f"{none.mean:.3g}", longest=ns[-1], rise=str(rise(t, rope)))
    explode = (
        "The corpus's unigram baseline is not known here, so whether raw extrapolation breaks down is not read."
        if unigram is None
        else paper.say(
            "exploded" if none.mean >= unigram[0] else "not_exploded", unigram=f"{unigram[0]:.3g}{unigram[1]}", **words
        )
    )
    s.lines += [
        f"**Verdict:** {family.verdict} ({family.counts()}; {family.correction_words()}) — the paper's claim "
        f"is that {scale} is usable where raw extrapolation is not, after a short fine-tune; the untuned "
        "comparisons are ours, paired by seed:",
        *family.lines(),
        explode
        + (
            ""
            if family.verdict == AGREES
            else " " + paper.say("why_not", factor=multiple(t), **about(meta, TEXT.name, t))
        ),
    ]
    return s


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
    # every rescaling scores the same trained model of a seed: compare them paired by seed, after the
    # fine-tune (the paper's orderings are those of fine-tuned models)
    margin, tests = paper.margin("equal_bits"), []
    for name, pairs in paper.order.items():
        for a, rel, b in pairs:
            if not spans[name]:
                continue
            arms = (per_seed(t, spans[name], scale=sc, finetune_steps=ft, metric="bpb") for sc in (a, b))
            key = f"{name} {a} − {b}"
            tests.append(Test.of(key, rel, *arms, margin=margin, effect=paper.effect(key)))

    def ranked(at: int) -> dict[str, str]:
        """Per span, the scalings best first, ties (the same value in every seed) marked ``=``."""
        out = {}
        for name, span in spans.items():
            values = {sc: per_seed(t, span, scale=sc, finetune_steps=at, metric="bpb") for sc in scales}
            order = sorted(scales, key=lambda sc: _span_estimate(t, span, scale=sc, finetune_steps=at).mean)
            out[name] = ranking(order, values)
        return out

    tuned, untuned = ranked(ft), ranked(0)
    family = Family("YaRN", tests, model=about(meta, TARGET.name, t)["model"])
    s.families.append(family)
    s.lines = [
        f"Ours: {', '.join(t['pe'].unique())} trained at {lengths(t)[0]} bytes, every "
        f"rescaling at a fixed factor {factor} (target "
        f"{int(lengths(t)[0]) * factor}), bits per byte averaged over the lengths within and beyond the target "
        "(`suite/extrapolation_target.csv`):",
        "",
        md(pd.DataFrame(rows)),
        "",
        f"After {ft} fine-tune steps (the paper's orderings are of fine-tuned models): within the target "
        f"{tuned['within']}, beyond it {tuned['beyond']}. Without fine-tune (ours only, not the paper's "
        f"protocol): within {untuned['within']}, beyond {untuned['beyond']}.",
        f"**Verdict:** {family.verdict} ({family.counts()}; {family.correction_words()}) — the published "
        "order as tests on the same trained model under each rescaling, paired by seed, after the fine-tune "
        "(bits per byte):",
        *family.lines(),
    ]
    if family.verdict != AGREES:
        s.lines.append(paper.say("why_not", steps=str(ft), **about(meta, TARGET.name, t)))
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
        # a change c − p lies in [−p, 1 − p]: the table's change minus the rotary one's lies in
        # [−p_t − (1 − p_r), (1 − p_t) + p_r] for their accuracies p at the training resolution
        p_t, p_r = (accuracy(a, px).mean for a in arms)
        test = Test.of(
            f"{sub['table']} change − {sub['rotary']} change at {higher[-1]}",
            "<",
            *(change(a, higher[-1], px) for a in arms),
            bounds=(-p_t - (1 - p_r), 1 - p_t + p_r),
            effect=paper.effect("gap"),
            items=items(untuned),
        )
        family = Family("RoPE-ViT", [test], model=about(meta, RESOLUTION.name, r)["model"])
        s.families.append(family)
        s.lines += [
            f"**Verdict:** {family.verdict} ({family.correction_words()}) — at {higher[-1]} the interpolated "
            f"{sub['table']} table ({sub['table_method']}) changes by {ape}, {sub['rotary']} "
            f"({sub['rotary_method']}) by {mixed}; the published claim is that the table loses more, paired by seed:",
            *family.lines(),
        ]
        if family.verdict != AGREES:
            s.lines.append(paper.say("why_not"))
    return s


def _nope_family(p: pd.DataFrame, n: str, subject: str, label: str, meta: Meta) -> tuple[str, Family]:
    """The ranking line and the tests of ``subject`` above every other scheme at length ``n``."""
    acc = {pe: accuracy(p, n, pe=pe) for pe in p["pe"].unique()}
    ranked = sorted((pe for pe in acc if acc[pe].n), key=lambda pe: -acc[pe].mean)
    tests = [
        Test.of(
            f"{subject} − {pe} at {n}",
            ">",
            per_seed(p, n, pe=subject),
            per_seed(p, n, pe=pe),
            bounds=ACCURACY_GAP,
            items=items(p),
        )
        for pe in ranked
        if pe != subject
    ]
    family = Family(f"NoPE, {label}", tests, model=about(meta, PASSKEY.name, p)["model"])
    rank = f"{subject} ranks {ranked.index(subject) + 1} of {len(ranked)} by mean" if subject in ranked else ""
    return rank, family


def _algorithmic(a: pd.DataFrame, subject: str, meta: Meta) -> tuple[list[str], Family]:
    """The paper's own protocol: per task, exact match at the training length L and at 2L, and
    the tests of ``subject`` above every other scheme at 2L, one family over every task."""
    rows, tests = [], []
    for task, part in a.groupby("task", sort=False):
        ns = [n for n in lengths(part) if part[n].notna().any()]
        metric = primary_metric(part)
        part = select(as_trained(part), metric=metric)
        if len(ns) < 2 or subject not in set(part["pe"]):
            continue
        train, double = ns[0], ns[-1]
        n = items(part)
        chance = chance_levels(part) or "—"  # each task its own
        for pe in part["pe"].unique():
            rows.append(
                {
                    "task": task,
                    "pe": pe,
                    f"L ({metric.replace('_', ' ')})": f"{train}: {accuracy(part, train, pe=pe)}",
                    "2L": f"{double}: {accuracy(part, double, pe=pe)}",
                    "chance": chance,
                }
            )
            if pe != subject:
                arms = (per_seed(part, double, pe=x) for x in (subject, pe))
                tests.append(Test.of(f"{task}: {subject} − {pe} at {double}", ">", *arms, bounds=ACCURACY_GAP, items=n))
    family = Family("NoPE, algorithmic tasks at 2L", tests, model=about(meta, ALGORITHMIC.name, a)["model"])
    return [md(pd.DataFrame(rows))] if rows else [], family


def _text_rises(t: pd.DataFrame, subject: str, meta: Meta) -> Family:
    """On text: ``subject`` rises less from the training length to the longest than each other
    scheme (unscaled), paired by seed."""
    # a scheme without a row at the longest length (a learned table shorter than it) has no rise
    rivals = [pe for pe in as_trained(t)["pe"].unique() if pe != subject and rises(t, pe)]
    tests = [
        Test.of(f"rise {subject} − rise {pe} at {multiple(t)}", "<", rises(t, subject), rises(t, pe)) for pe in rivals
    ]
    return Family(f"NoPE, text rise at {multiple(t)}", tests, model=about(meta, TEXT.name, t)["model"])


def nope(tables: Tables, meta: Meta) -> Section:
    s, paper = start("NoPE"), finding("NoPE")
    t, p, a = ext_table(tables), ext_table(tables, PASSKEY.name), present(tables, ALGORITHMIC.name)
    if t is None and p is None and a is None:
        s.lines = missing(tables, PASSKEY.name)
        return s
    subject, lines = paper.subject("scheme"), []
    if a is not None and "task" in a:
        table, family = _algorithmic(a, subject, meta)
        if family.tests:
            s.families.append(family)
            lines += [
                "The paper's protocol: each algorithmic task trained at L and scored at L and 2L on the test split "
                "by exact match of the whole answer, beside its chance level where the task declares one "
                "(`suite/algorithmic.csv`):",
                *table,
                f"**Verdict:** {family.verdict} at 2L ({family.counts()}; {family.correction_words()}) — the "
                f"published claim is that {subject} generalizes better than each other scheme, paired by seed:",
                *family.lines(),
            ]
    if p is not None:
        metric = primary_metric(p)
        ns, plain = lengths(p), select(as_trained(p), metric=metric)
        acc = {pe: accuracy(plain, ns[-1], pe=pe) for pe in plain["pe"].unique()}
        at_l = {pe: accuracy(plain, ns[0], pe=pe) for pe in acc}
        chance = chance_words(plain)
        lines.append(
            f"Passkey {metric.replace('_', ' ')} at {ns[0]} → {ns[-1]} tokens (no rescaling{chance}): "
            + "; ".join(f"{pe} {at_l[pe]} → {acc[pe]}" for pe in acc)
            + "."
        )
        if subject in acc:
            double = str(2 * int(ns[0]))
            reads = [(double, f"at 2× ({double} tokens, the paper's protocol)")] if double in ns[1:] else []
            reads += [(ns[-1], f"at {ns[-1]} tokens")] if ns[-1] != double else []
            for n, label in reads:
                rank, family = _nope_family(plain, n, subject, label, meta)
                s.families.append(family)
                lines += [
                    f"**Verdict:** {family.verdict} {label} ({family.counts()}; {family.correction_words()}) — "
                    f"{rank}; the published claim is that {subject} generalizes better than each other scheme, "
                    "paired by seed:",
                    *family.lines(),
                ]
    if t is not None and subject in set(as_trained(t)["pe"]):
        rivals = {pe: rise(t, pe) for pe in as_trained(t)["pe"].unique() if pe != subject}
        family = _text_rises(t, subject, meta)
        s.families.append(family)
        lines += [
            f"Text: {subject} rises by {rise(t, subject)} bits per byte at {multiple(t)}; "
            + ", ".join(f"{pe} by {e}" for pe, e in rivals.items() if e.n)
            + ".",
            f"**Verdict:** {family.verdict} on text ({family.counts()}; {family.correction_words()}) — {subject}'s "
            "rise against each other scheme's, paired by seed (ours: the paper does not test text):",
            *family.lines(),
        ]
    if any(f.verdict != AGREES for f in s.families):
        lines.append(paper.say("why_not", **about(meta, PASSKEY.name, p if p is not None else t)))
    s.lines = lines
    return s


FINDINGS: tuple[Callable[[Tables, Meta], Section], ...] = (vit_ablation, alibi, pi, yarn, rope_vit, nope)
