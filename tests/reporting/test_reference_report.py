"""The report generator (claims, findings, REPORT.md) on a small fixed set of tables: every claim has its section and
its
numbers, and the verdicts follow the intervals (the same tables with the effect reversed flip them)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats as scipy_stats

from posenc.analysis.stats import summarize
from posenc.core.errors import UserError
from posenc.reporting.claims import CLAIMS, Estimate
from posenc.reporting.findings import FINDINGS
from posenc.reporting.reference_report import render, write_report

SEEDS = (0, 1, 2)
NOISE = (-0.01, 0.0, 0.01)  # per seed: a 95% interval of ±0.0248 around each mean


def extrapolation_text(
    rope_rise: float = 1.0, alibi_rise: float = 0.0, seeds=SEEDS, noise=NOISE, more: dict[str, float] | None = None
) -> pd.DataFrame:
    rows = []
    rises = {
        "nope": 0.5,
        "learned": math.nan,
        "sinusoidal": 0.8,
        "t5": 0.3,
        "alibi": alibi_rise,
        "kerple": 0.05,
        "fire": 0.2,
        "rope": rope_rise,
        **(more or {}),
    }
    for pe, r in rises.items():
        scales = {"none": r}
        if pe == "rope":
            scales |= {"pi": 1.6, "ntk": 0.6, "yarn": 0.4}
        for scale, rs in scales.items():
            for seed, eps in zip(seeds, noise):
                base = 3.0 + eps
                values = {"64": base, "128": base + rs / 2, "256": base + rs}
                if pe == "learned":
                    values |= {"128": math.nan, "256": math.nan}
                for metric, f in (("bpb", lambda v: v), ("ppl", lambda v: 2**v)):
                    rows.append(
                        {
                            "pe": pe,
                            "seed": seed,
                            "scale": scale,
                            "finetune_steps": 0,
                            "metric": metric,
                            **{k: f(v) for k, v in values.items()},
                            "status": "completed",
                        }
                    )
    return pd.DataFrame(rows)


def extrapolation_target(agree: bool = True) -> pd.DataFrame:
    """RoPE at factor 4 from 64 bytes: within the target 128-256, beyond 512-1024."""
    within = {"pi": 3.1, "yarn": 3.1, "ntk": 3.3} if agree else {"pi": 3.5, "yarn": 3.1, "ntk": 3.0}
    beyond = {"yarn": 3.5, "ntk": 3.55, "pi": 4.5} if agree else {"yarn": 4.5, "ntk": 3.5, "pi": 3.4}
    rows = []
    for scale in ("pi", "ntk", "yarn"):
        for ft in (0, 25):
            for seed, eps in zip(SEEDS, NOISE):
                w, b = within[scale] + (0.0 if ft else 0.2) + eps, beyond[scale] + eps
                rows.append(
                    {
                        "pe": "rope",
                        "seed": seed,
                        "extrapolation.factor": 4.0,
                        "scale": scale,
                        "finetune_steps": ft,
                        "metric": "bpb",
                        "64": 3.0 + eps,
                        "128": w,
                        "256": w,
                        "512": b,
                        "1024": b,
                        "status": "completed",
                    }
                )
    return pd.DataFrame(rows)


def extrapolation_passkey(
    best: str = "nope", noise=NOISE, far: tuple[float, float] = (0.6, 0.2), near: float = 0.9
) -> pd.DataFrame:
    """Accuracy at 32 tokens ``near``, at 512 ``far`` (the best scheme's, the others'), plus the seed's noise."""
    rows = []
    for pe in ("nope", "learned", "alibi", "rope"):
        for scale in ["none", "pi", "ntk", "yarn"] if pe == "rope" else ["none"]:
            for seed, eps in zip(SEEDS, noise):
                rows.append(
                    {
                        "pe": pe,
                        "seed": seed,
                        "scale": scale,
                        "finetune_steps": 0,
                        "metric": "accuracy",
                        "32": near + eps,
                        "512": far[pe != best] + eps,
                        "status": "completed",
                    }
                )
    return pd.DataFrame(rows)


def resolution(
    nope_acc: float = 0.25, rel_acc: float = 0.95, seeds_at32: dict[str, tuple] | None = None, items: int | None = None
) -> pd.DataFrame:
    """``seeds_at32``: a scheme's accuracy at 32 px in each seed, in place of its mean plus the noise;
    ``items``: the evaluation items behind each accuracy (the column ``resolution.eval_items``)."""
    rows = []
    plan = {
        "nope": ["none"],
        "learned": ["bilinear", "bicubic"],
        "learned2d": ["bilinear", "bicubic"],
        "rel2d": ["clip"],
        "sincos2d": ["bicubic"],
        "rope2d_mixed": ["interpolate", "extrapolate"],
    }
    for pe, methods in plan.items():
        for method in methods:
            for ft in (0, 10):
                for seed, eps in zip(SEEDS, NOISE):
                    at32 = {"nope": nope_acc, "rel2d": rel_acc}.get(pe, 0.95) + eps
                    at32 = (seeds_at32 or {}).get(pe, {seed: at32})[seed]
                    drop = 0.3 if pe.startswith("learned") and not ft else 0.05
                    if pe == "rope2d_mixed" and method == "extrapolate":
                        drop = 0.0
                    rows.append(
                        {
                            "pe": pe,
                            "seed": seed,
                            "method": method,
                            "finetune_steps": ft,
                            **({"resolution.eval_items": items} if items else {}),
                            "16px": at32 - drop,
                            "32px": at32,
                            "64px": at32 - drop,
                            "status": "completed",
                        }
                    )
    return pd.DataFrame(rows)


def similarity() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"pe": pe, "seed": s, "rank_corr_init": 0.0 + e, "rank_corr_trained": 0.5 + e}
            for pe in ("learned", "learned2d")
            for s, e in zip(SEEDS, NOISE)
        ]
    )


def order() -> pd.DataFrame:
    rows = []
    cells = [
        ("lm_tiny", "bidirectional", "nope", 1e-7, 0.5),
        ("lm_tiny", "causal", "nope", 0.4, 1.0),
        ("lm_tiny", "bidirectional", "rope", 5e-3, 1.0),
        ("vit_tiny", "bidirectional", "nope", 1e-7, 0.25),
    ]
    for model, attention, pe, residual, acc in cells:
        for phase in ("init", "trained"):
            for seed, eps in zip(SEEDS, NOISE):
                rows.append(
                    {
                        "model": model,
                        "attention": attention,
                        "pe": pe,
                        "task": "order",
                        "phase": phase,
                        "equivariance_residual": residual,
                        "invariant": residual <= 1e-5,
                        "accuracy": (acc + eps) if phase == "trained" else 0.0,
                        "chance": 0.5,
                        "chance_95": 0.54,
                        "above_chance": acc > 0.54,
                        "seed": seed,
                        "status": "completed",
                    }
                )
    return pd.DataFrame(rows)


def check() -> pd.DataFrame:
    rows = [
        ("C4", "PE(pos+Δ) = M_Δ·PE(pos)", "sinusoidal", 1e-9, "≤", 1e-6),
        ("C8", "bias depends on i − j", "t5", 0.0, "≤", 1e-6),
        ("C9", "⟨R_m q, R_n k⟩ depends only on n − m", "rope", 1e-7, "≤", 1e-5),
        ("C10", "long-term decay", "rope", 0.3, "≤", 0.5),
    ]
    return pd.DataFrame(
        [
            {
                "claim": c,
                "check": k,
                "pe": pe,
                "measured": m,
                "criterion": cr,
                "tolerance": tol,
                "passed": True,
                "note": "",
                "seed": s,
                "status": "completed",
            }
            for c, k, pe, m, cr, tol in rows
            for s in SEEDS
        ]
    )


def tables(**changes) -> dict[str, pd.DataFrame]:
    out = {
        "extrapolation_text": extrapolation_text(),
        "extrapolation_target": extrapolation_target(),
        "extrapolation_passkey": extrapolation_passkey(),
        "resolution": resolution(),
        "resolution_similarity": similarity(),
        "order": order(),
        "check": check(),
    }
    return out | changes


META = {
    "suite": "quick",
    "description": "test",
    "seeds": [0, 1, 2],
    "launcher": "basic",
    "seconds": 600.0,
    "machine": {"cpus": 2, "machine": "x86_64", "torch": "2.x", "python": "3.11"},
    "sweeps": {"order": {"jobs": 3, "seconds": 60.0, "description": "order"}},
    "left_out": {"resolution_relational": "resolution_relational"},  # tables() has no relational table
}


def section(text: str, key: str) -> str:
    match = re.search(rf"^### {re.escape(key)} — .*?(?=^### |^## |\Z)", text, flags=re.M | re.S)
    assert match, f"no section {key}"
    return match.group(0)


def test_every_claim_and_finding_has_a_section_with_numbers():
    text = render(tables(), META)
    for n in range(1, 13):
        body = section(text, f"C{n}")
        assert "Not measured" not in body, body
        assert re.search(r"\d\.\d|\de-\d", body), f"C{n} has no number"
    for key in ("ViT", "ALiBi", "PI", "YaRN", "RoPE-ViT", "NoPE"):
        assert "**Verdict:**" in section(text, key)
    assert "10.0 min on 2 CPU cores" in text
    assert len(CLAIMS) == 12 and len(FINDINGS) == 6


def test_intervals_are_student_t_over_seeds():
    e = Estimate.of([3.0, 3.1, 3.2])
    half = scipy_stats.t.ppf(0.975, 2) * np.std([3.0, 3.1, 3.2], ddof=1) / math.sqrt(3)
    assert (e.mean, e.low, e.high) == pytest.approx((3.1, 3.1 - half, 3.1 + half))
    assert str(e) == f"3.1 [{3.1 - half:.3g}, {3.1 + half:.3g}] (n=3)"
    assert str(Estimate.of([2.0])) == "2 (n=1)" and str(Estimate.of([])) == "—"


def test_numbers_in_the_sections_are_the_tables_means():
    text = render(tables(), META)
    # C5: rope rises by exactly 1.0 in every seed (interval of zero width), sinusoidal by 0.8
    assert "rope rises by 1 [1, 1] (n=3) bits per byte from 64 to 256 (it does not generalize)" in section(text, "C5")
    assert "sinusoidal rises by 0.8 [0.8, 0.8] (n=3)" in section(text, "C5")
    # C3: the learned table has no score past its length
    assert "at 128, 256 it cannot be evaluated" in section(text, "C3")
    # C6: the similarity gain of 0.5 in every seed
    assert "gains 0.5 [0.5, 0.5] (n=3)" in section(text, "C6")
    # C1: residual 1e-07 is under the tolerance; bidirectional NoPE at chance
    assert "moves by at most 1e-07" in section(text, "C1") and "equivariant, as claimed" in section(text, "C1")
    assert "(chance bound 0.54: not shown above it)" in section(text, "C1")
    # C11: the order at the longest length, best first
    assert "at 256 bytes the order from best to worst is yarn < ntk < none < pi" in section(text, "C11")
    assert "4 of 4 measurements pass" in section(text, "C10") or "3 of 3" in section(text, "C10")


@pytest.mark.parametrize(
    ("changes", "key", "agrees"),
    [
        ({}, "ALiBi", True),
        ({"extrapolation_text": extrapolation_text(rope_rise=0.0, alibi_rise=1.0)}, "ALiBi", False),
        ({}, "ViT", True),
        ({"resolution": resolution(nope_acc=0.97)}, "ViT", False),  # no PE above the absolute schemes
        ({}, "NoPE", True),
        ({"extrapolation_passkey": extrapolation_passkey(best="rope")}, "NoPE", False),
        ({}, "RoPE-ViT", True),
        ({}, "PI", False),  # PI (1.6) is worse than no scaling (1.0) at 16x in the fixed table
        ({}, "YaRN", True),
        ({"extrapolation_target": extrapolation_target(agree=False)}, "YaRN", False),
    ],
)
def test_verdicts_follow_the_numbers(changes, key, agrees):
    """Every seed moves together in the fixed tables, so each test is decided: the published relation
    agrees, the reversed effect disagrees (never inconclusive)."""
    body = section(render(tables(**changes), META), key)
    assert f"**Verdict:** {'agrees' if agrees else 'disagrees'}" in body


def test_a_difference_that_is_exactly_zero_is_inconclusive_not_disagreeing():
    """No PE at par with the absolute schemes in every seed: the claim "clearly worse" is not shown,
    and neither is its opposite, so the ablation cannot tell (before: "no")."""
    body = section(render(tables(resolution=resolution(nope_acc=0.95)), META), "ViT")
    assert "**Verdict:** inconclusive on the absolute task" in body and "9 agree, 3 inconclusive of 12" in body
    assert "- nope − learned < 0: 0 [0, 0] (n=3); paired t, p = 1, corrected 1 → **inconclusive**" in body


def test_a_relative_scheme_at_chance_makes_the_vit_ablation_disagree():
    """rel2d 0.7 below the absolute schemes in every seed: its equivalence within ±0.02 is rejected,
    so the ablation disagrees (before: "partly"), while no PE is still shown below every absolute one."""
    body = section(render(tables(resolution=resolution(rel_acc=0.25)), META), "ViT")
    assert "**Verdict:** disagrees on the absolute task" in body and "9 agree, 3 disagree of 12 tests" in body
    assert "- |rel2d − learned| < 0.02: -0.7 [-0.7, -0.7] (n=3); TOST, margin 0.02" in body
    assert "- nope − learned < 0: -0.7 [-0.7, -0.7] (n=3); paired t" in body
    assert "A bias that depends only on offsets is translation-invariant" in body


def test_yarn_ordering_within_and_beyond_the_target():
    """Both published orderings are of fine-tuned models, so both are tested after the fine-tune; the
    untuned ranking is printed as ours. PI and YaRN are the same in every seed: tied, not ordered."""
    body = section(render(tables(), META), "YaRN")
    assert "**Verdict:** agrees (5 agree of 5 tests; Holm over 5 tests, α = 0.05)" in body
    assert (
        "After 25 fine-tune steps (the paper's orderings are of fine-tuned models): within the target pi = yarn < ntk"
        in body
    )
    assert "Without fine-tune (ours only, not the paper's protocol): within pi = yarn < ntk" in body
    assert "- |within pi − yarn| < 0.05: 0 [0, 0] (n=3); TOST, margin 0.05" in body
    assert "- beyond yarn − ntk < 0.05: -0.05 [-0.05, -0.05] (n=3); one-sided paired t" in body
    body = section(render(tables(extrapolation_target=extrapolation_target(agree=False)), META), "YaRN")
    assert "**Verdict:** disagrees (5 disagree of 5 tests" in body
    # PI: fine-tuning lowers its loss within the target (3.3 -> 3.1 in the fixed table)
    assert "- pi after − before 25 fine-tune steps over 128–256 < 0: -0.2 [-0.2, -0.2] (n=3)" in section(
        render(tables(), META), "PI"
    )


def test_a_missing_sweep_is_reported_not_fatal():
    text = render({"check": check()}, META)
    assert "Not measured" in section(text, "C1") and "Not measured" in section(text, "C5")
    assert "Not measured" not in section(text, "C4")


def test_write_report_writes_the_report_tables_and_plots(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "stale.csv").write_text("old")
    report = write_report(tables(), META, tmp_path)
    assert report == tmp_path / "REPORT.md"
    files = {p.name for p in (tmp_path / "suite").iterdir()}
    assert "stale.csv" not in files  # the folder is replaced whole
    for name in ("extrapolation_text", "extrapolation_passkey", "resolution", "order"):
        assert f"{name}.png" in files and f"{name}.csv" in files
    assert {"check.csv", "resolution_similarity.csv", "suite.csv"} <= files
    text = report.read_text()
    for png in re.findall(r"\]\((suite/[^)]+\.png)\)", text):
        assert (tmp_path / png).exists()
    back = pd.read_csv(tmp_path / "suite" / "extrapolation_text.csv")
    assert back["64"].tolist() == pytest.approx(tables()["extrapolation_text"]["64"].tolist())


def test_the_report_figures_take_the_format_the_suite_ran_with(tmp_path):
    """posenc suite plots.format=svg: the report's figures are SVG files and REPORT.md links them."""
    meta = {**META, "sweeps": {"extrapolation_text": {"overrides": ["task=text", "plots.format=svg"]}}}
    report = write_report(tables(), meta, tmp_path)
    files = {p.name for p in (tmp_path / "suite").iterdir()}
    for name in ("extrapolation_text", "resolution", "order"):
        assert f"{name}.svg" in files and f"{name}.png" not in files
        assert (tmp_path / "suite" / f"{name}.svg").read_bytes().lstrip().startswith(b"<?xml")
    links = re.findall(r"suite/[\w.]+\.(?:png|svg|pdf)", report.read_text())
    assert links and all(link.endswith(".svg") and (tmp_path / link).exists() for link in links)


MODEL = {"name": "lm_tiny", "d_model": 64, "n_layers": 2, "n_heads": 4, "steps": 400, "seq_len": 64}


def test_the_reasons_name_the_suites_own_model_and_seeds():
    """Before, the prose said "tiny model" and "three seeds" whatever the suite ran (suite/full.yaml too)."""
    five = extrapolation_text(rope_rise=0.0, alibi_rise=1.0, seeds=range(5), noise=(-0.01, 0.0, 0.01, 0.0, 0.0))
    meta = META | {"sweeps": {"extrapolation_text": {"jobs": 40, "model": MODEL}}}
    body = section(render(tables(extrapolation_text=five), meta), "ALiBi")
    assert "**Verdict:** disagrees" in body
    assert "Our 2-layer, 64-wide model (lm_tiny, 400 training steps) trained at 64 bytes" in body
    assert "with 5 seeds" in body and "three" not in body and "tiny model" not in body
    # a suite recorded without model sizes says "model", not a size it does not know
    assert "Our model trained at 64 bytes" in section(render(tables(extrapolation_text=five), META), "ALiBi")


def test_a_scheme_new_to_the_tables_joins_every_section_that_loops_over_them():
    """xpos and relative were in no list of the old report; the tables alone bring them in."""
    text = render(tables(extrapolation_text=extrapolation_text(more={"xpos": 0.7, "relative": 0.25})), META)
    assert "xpos 0.7 [0.7, 0.7] (n=3)" in section(text, "ALiBi") and "relative 0.25 [0.25, 0.25] (n=3)" in section(
        text, "ALiBi"
    )
    assert "relative 0.25 [0.25, 0.25] (n=3)" in section(text, "C8")  # a bias scheme: its class adds a bias
    assert "xpos" not in section(text, "C8")  # a rotation, not a bias
    assert "| xpos " in section(text, "C5")


def test_the_report_folder_reads_back_into_the_same_report(tmp_path):
    from posenc.launch.suite import collect, read

    meta = META | {"sweeps": {"extrapolation_text": {"jobs": 24, "seconds": 60.0, "model": MODEL}}}
    write_report(tables(), meta, tmp_path)
    back, saved = collect(tmp_path / "suite"), read(tmp_path / "suite")
    assert set(back) == set(tables()) and saved["sweeps"] == meta["sweeps"] and saved["seeds"] == [0, 1, 2]
    assert render(back, saved) == render(tables(), meta)


INTERVAL = re.compile(r"(-?\d[\d.e+-]*) \[(-?\d[\d.e+-]*), (-?\d[\d.e+-]*)\]( \(n=\d+[^)]*\))?")


def test_every_interval_in_the_report_carries_its_number_of_seeds():
    text = render(tables(resolution_relational=resolution()), META)
    found = INTERVAL.findall(text)
    assert len(found) > 100
    assert [m for m in found if not m[3]] == []


def test_accuracy_intervals_stay_inside_0_1_where_the_t_interval_left_it():
    """Before, accuracies took the plain t interval: learned at 32 px in seeds 0.99, 0.97, 0.70 read
    "0.887 [0.484, 1.29]"; now every accuracy interval of the resolution tables lies inside [0, 1]."""
    spread = (0.99, 0.97, 0.70)
    assert summarize(spread)["ci95_high"] > 1  # the old interval
    for items in (None, 128):
        text = render(tables(resolution=resolution(seeds_at32={"learned": spread}, items=items)), META)
        untuned = section(text, "C7").split("After ")[0]
        cells = [m for line in untuned.splitlines() if line.startswith("| learned ") for m in INTERVAL.findall(line)]
        ours = [
            m for line in section(text, "ViT").splitlines() if line.startswith("Ours") for m in INTERVAL.findall(line)
        ]
        assert len(cells) == 2 * 3 and len(ours) == 6  # learned: 2 methods x 3 resolutions; 6 schemes
        for mean, low, high, n in cells + ours:
            assert 0 <= float(low) <= float(mean) <= float(high) <= 1
            assert n == (" (n=3, 128 items)" if items else " (n=3, items unknown)")
        expected = Estimate.accuracy(list(spread), items)
        assert f"learned {expected}" in section(text, "ViT") and expected.high < 1


def test_a_paired_verdict_separates_schemes_whose_intervals_overlap():
    """Every seed moves all schemes together (noise ±0.15) and NoPE beats each by 0.05 in every seed: the
    per-scheme intervals overlap (the old verdict: "partly", ties), the paired differences do not."""
    noisy = extrapolation_passkey(noise=(-0.15, 0.0, 0.15), far=(0.45, 0.40), near=0.8)
    nope_far = Estimate.accuracy([0.30, 0.45, 0.60])
    rope_far = Estimate.accuracy([0.25, 0.40, 0.55])
    assert rope_far.high > nope_far.low  # unpaired: not separated
    body = section(render(tables(extrapolation_passkey=noisy), META), "NoPE")
    assert "- nope − learned at 512 > 0: 0.05 [0.05, 0.05] (n=3); paired t" in body
    assert "**Verdict:** agrees at 512 tokens (3 agree of 3 tests" in body
    # the same gap in only one seed is not shown: we cannot tell
    one = noisy.copy()
    one.loc[(one["pe"] != "nope") & (one["seed"] != 1), "512"] += 0.05
    assert "**Verdict:** inconclusive at 512 tokens" in section(render(tables(extrapolation_passkey=one), META), "NoPE")


def test_the_vit_ablation_reads_the_absolute_and_the_relational_task():
    """With a relative scheme at chance on the quadrant label but at par on the relational one, the
    absolute task agrees partly and the relational one fully; without the relational table it says so."""
    text = render(tables(resolution=resolution(rel_acc=0.25), resolution_relational=resolution(rel_acc=0.95)), META)
    body = section(text, "ViT")
    assert "**Verdict:** disagrees on the absolute task (label = the quadrant that holds the shape)" in body
    assert "**Verdict:** agrees on the relational task (label = is the red shape above the blue one)" in body
    assert "relative positions suffice" in body and "Not measured" not in body
    body = section(render(tables(resolution=resolution(rel_acc=0.25)), META), "ViT")
    assert "Not measured on the relational task" in body and "the table `resolution_relational` was not run." in body
    body = section(
        render(tables(resolution_relational=resolution(rel_acc=0.5)) | {"resolution": pd.DataFrame()}, META), "ViT"
    )
    assert "Not measured on the absolute task" in body and "**Verdict:** disagrees on the relational task" in body
    assert "under-trained" in body


def test_models_under_their_target_are_named_and_left_out_of_the_averages():
    """With a ``reached_target`` column (train to criterion), a run that did not learn is counted and named,
    and the resolution readings average only the seeds that learned; the ViT ablation still reads it."""
    r = resolution()
    r["reached_target"] = ~((r["pe"] == "learned") & (r["seed"] == 1)) & (r["pe"] != "nope")
    text = render(tables(resolution=r), META)
    under = text.split("## Models under their training target")[1].split("## ")[0]
    assert "- `resolution`: 4 did not learn — nope (seed 0, 1, 2); learned (seed 1)." in under
    c7 = section(text, "C7").split("After ")[0]
    (row,) = [line for line in c7.splitlines() if line.startswith("| learned ") and "bilinear" in line]
    assert row.count("(n=2, items unknown)") == 3 and "(n=3" not in row
    assert "nope" not in c7  # no seed of it learned
    assert "nope 0.25 [" in section(text, "ViT")  # the ablation reads every model
    # every model at its target: said once; a table without the column: no such part, as before
    r["reached_target"] = True
    assert "Every model reached its training target." in render(tables(resolution=r), META)
    assert "training target" not in render(tables(), META)


def test_controls_are_listed_apart_with_their_reason_and_a_control_that_learned_shows():
    """A sweep's ``controls`` (schemes that cannot learn its label by construction) are not counted
    as models that fell short; each is listed under Controls with its reason and how many runs
    stayed under target, so a control that learned would show (0 of n). A control named by part of
    a run's identity ("bidirectional nope") leaves the causal NoPE among the ordinary models."""
    r = resolution()
    r["reached_target"] = r["pe"] != "nope"
    o = order()
    o["reached_target"] = ~((o["pe"] == "nope") & (o["attention"] == "bidirectional"))
    meta = META | {
        "sweeps": {
            "resolution": {"controls": {"nope": "no positions: a bag of patches"}},
            "order": {"controls": {"bidirectional nope": "permutation-equivariant"}},
        }
    }
    text = render(tables(resolution=r, order=o), meta)
    under = text.split("## Models under their training target")[1].split("## The seed")[0]
    assert "Every model reached its training target (the controls apart)." in under
    assert "- `resolution` nope: 3 of 3 runs under target — no positions: a bag of patches" in under
    # two models (lm_tiny, vit_tiny) x 3 seeds; the causal NoPE learned and is no control
    assert "- `order` bidirectional nope: 6 of 6 runs under target — permutation-equivariant" in under
    # the same runs without the suite's controls are models that did not learn
    plain = render(tables(resolution=r, order=o), META).split("## Models under their training target")[1]
    assert "- `resolution`: 3 did not learn — nope (seed 0, 1, 2)." in plain and "### Controls" not in plain
    # a control that learned contradicts its reason: it shows as 0 of n
    r["reached_target"] = True
    text = render(tables(resolution=r), meta)
    assert "- `resolution` nope: 0 of 3 runs under target" in text


def test_a_relative_scheme_named_as_control_is_explained_not_counted_against_the_parity():
    """rel2d at chance on the absolute task: without controls the ablation disagrees (its
    equivalence is rejected); named as the sweep's control it is explained by its reason and not
    tested, and the parity of the relative schemes that can express the label decides the verdict."""
    r = resolution(rel_acc=0.25)
    plain = section(render(tables(resolution=r), META), "ViT")
    assert "**Verdict:** disagrees on the absolute task" in plain and "|rel2d − learned|" in plain
    meta = META | {"sweeps": {"resolution": {"controls": {"rel2d": "offsets only: translation-invariant"}}}}
    body = section(render(tables(resolution=r), meta), "ViT")
    assert "**Verdict:** agrees on the absolute task" in body and "(9 agree of 9 tests;" in body
    assert "|rel2d" not in body
    assert "rel2d is a control of this task, not tested: offsets only: translation-invariant." in body


def test_the_model_words_name_a_scheme_trained_by_its_own_recipe():
    """A sweep that fills another's table with its own model (NoPE's 4 layers) shows in the model's
    words; trained to criterion, the steps read as a cap."""
    from posenc.reporting.tables import about

    lm = {"name": "lm_tiny", "d_model": 64, "n_layers": 2, "steps": 4000}
    meta = {
        "seeds": [0, 1],
        "sweeps": {
            "extrapolation_text": {"model": lm, "overrides": ["pe=rope,alibi"]},
            "extrapolation_text_nope": {
                "model": lm | {"n_layers": 4},
                "table": "extrapolation_text",
                "overrides": ["pe=nope", "model.n_layers=4"],
            },
        },
    }
    trained = pd.DataFrame({"seed": [0, 1], "reached_target": [True, True]})
    assert about(meta, "extrapolation_text", trained)["model"] == (
        "2-layer, 64-wide model (lm_tiny, at most 4000 training steps; nope 4-layer, 64-wide)"
    )
    assert about(meta, "extrapolation_text", pd.DataFrame({"seed": [0]}))["model"] == (
        "2-layer, 64-wide model (lm_tiny, 4000 training steps; nope 4-layer, 64-wide)"
    )


def test_the_model_words_name_a_learning_rate_recipe():
    """A sweep that fills another's table with the same model but its position parameters at a
    higher lr (the relative schemes of passkey) is named with that lr; a sweep trained so
    throughout says it once."""
    from posenc.reporting.tables import about

    lm = {"name": "lm_tiny", "d_model": 64, "n_layers": 2, "steps": 4000, "pe_lr_scale": 1.0}
    meta = {
        "seeds": [0],
        "sweeps": {
            "passkey": {"model": lm, "overrides": ["pe=learned,sinusoidal"]},
            "passkey_relative": {
                "model": lm | {"pe_lr_scale": 10.0},
                "table": "passkey",
                "overrides": ["pe=fire,t5", "train.pe_lr_scale=10"],
            },
            "passkey_nope": {"model": lm | {"n_layers": 4}, "table": "passkey", "overrides": ["pe=nope"]},
        },
    }
    assert about(meta, "passkey")["model"] == (
        "2-layer, 64-wide model (lm_tiny, 4000 training steps; "
        "fire, t5 with position parameters at 10× the lr; nope 4-layer, 64-wide)"
    )
    scaled = {"seeds": [0], "sweeps": {"vit": {"model": lm | {"name": "vit_tiny", "pe_lr_scale": 10.0}}}}
    assert about(scaled, "vit")["model"] == (
        "2-layer, 64-wide model (vit_tiny, 4000 training steps, position parameters at 10× the lr)"
    )


def test_a_sweep_whose_models_all_missed_their_target_says_so_not_missing():
    """Every run under its target leaves nothing to read; the section says why (before: 'missing')."""
    from posenc.reporting.tables import missing

    t = pd.DataFrame(
        {"pe": ["rope", "rope"], "seed": [0, 1], "status": ["completed"] * 2, "reached_target": [False, False]}
    )
    assert missing({"extrapolation_text": t}, "extrapolation_text") == [
        "Not measured: no model of the suite's `extrapolation_text` sweep reached its training target "
        '(see "Models under their training target").'
    ]
    assert missing({}, "extrapolation_text") == [
        "Not measured: the table `extrapolation_text` was not run (its sweeps were left out: `posenc suite --only …`)."
    ]


def test_an_extrapolation_model_under_its_target_is_named_and_left_out():
    """The extrapolation tables carry ``reached_target`` per trained model (one value on every row of
    its scales and metrics, as the protocol writes it): a RoPE seed that missed its target, scored
    with a rise of 5 bits, is named and left out of C5's rise and the PI finding, which read two seeds."""
    t = extrapolation_text()
    missed = (t["pe"] == "rope") & (t["seed"] == 1)
    t.loc[missed & (t["metric"] == "bpb"), "256"] = 8.0
    t["reached_target"], t["target_step"] = ~missed, np.where(missed, np.nan, 200.0)
    g = extrapolation_target()
    g["reached_target"] = g["seed"] != 1
    text = render(tables(extrapolation_text=t, extrapolation_target=g), META)
    under = text.split("## Models under their training target")[1].split("## ")[0]
    assert "- `extrapolation_text`: 1 did not learn — rope (seed 1)." in under
    assert "- `extrapolation_target`: 1 did not learn — rope (seed 1)." in under
    assert "rope rises by 1 [1, 1] (n=2) bits per byte from 64 to 256" in section(text, "C5")
    assert "sinusoidal rises by 0.8 [0.8, 0.8] (n=3)" in section(text, "C5")  # the others keep every seed
    pi = section(text, "PI")  # its text lines read two seeds; the passkey table (all seeds learned) three
    text_lines = "\n".join(line for line in pi.splitlines() if "passkey" not in line)
    assert "(n=2)" in text_lines and "(n=3)" not in text_lines


def test_the_similarity_of_a_table_under_its_target_is_left_out_and_named_once():
    """C6 reads the similarity rows of models that reached their target (before: every row); the
    side table's models are named once, under their sweep."""
    r, sim = resolution(), similarity()
    r["reached_target"] = ~((r["pe"] == "learned") & (r["seed"] == 2))
    sim["reached_target"] = ~((sim["pe"] == "learned") & (sim["seed"] == 2))
    sim.loc[~sim["reached_target"], "rank_corr_trained"] = -0.9  # the seed that did not learn
    text = render(tables(resolution=r, resolution_similarity=sim), META)
    assert "gains 0.5 [0.5, 0.5] (n=2)" in section(text, "C6")
    under = text.split("## Models under their training target")[1].split("## ")[0]
    assert "- `resolution`: 1 did not learn — learned (seed 2)." in under and "resolution_similarity" not in under


ROOT = Path(__file__).resolve().parents[2]


def renamed_quick_suite(tmp_path: Path, table: bool) -> Path:
    """configs/suite/quick.yaml with its extrapolation_text sweep renamed text_lm (naming its table or not)."""
    node = yaml.safe_load((ROOT / "configs" / "suite" / "quick.yaml").read_text())
    sweeps = node["sweeps"]
    node["sweeps"] = {("text_lm" if k == "extrapolation_text" else k): v for k, v in sweeps.items()}
    if table:
        node["sweeps"]["text_lm"]["table"] = "extrapolation_text"
    path = tmp_path / ("named.yaml" if table else "unnamed.yaml")
    path.write_text(yaml.safe_dump(node))
    return path


def suite_meta(path: Path, only: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """What a run of the suite file records (``suite.json``'s sweeps) and the tables ``collect``
    makes of it (keyed by the table each sweep fills), from the synthetic tables."""
    from posenc.launch.suite import load

    specs = [s for s in load(str(path)).sweeps]
    ran = [s for s in specs if not only or s.name in only]
    meta = META | {
        "sweeps": {s.name: {"table": s.table, "jobs": 3, "description": s.description} for s in ran},
        "left_out": {s.name: s.table for s in specs if s not in ran},
    }
    full = tables(resolution_relational=resolution())
    collected = {s.table: full[s.table] for s in ran if s.table in full}
    for s in ran:  # side tables come with the sweeps of their table
        if f"{s.table}_similarity" in full:
            collected[f"{s.table}_similarity"] = full[f"{s.table}_similarity"]
    return collected, meta


def test_a_renamed_sweep_that_names_its_table_keeps_every_section(tmp_path):
    collected, meta = suite_meta(renamed_quick_suite(tmp_path, table=True))
    assert "text_lm" in meta["sweeps"] and "extrapolation_text" in collected
    report = write_report(collected, meta, tmp_path / "out")
    text = report.read_text()
    assert "Not measured" not in text
    # the sections read as those of the suite as it is, whose sweep has the table's name
    as_is = render(*suite_meta(ROOT / "configs" / "suite" / "quick.yaml"))
    assert _body_of(text).strip() == _body_of(as_is).strip()
    assert "rope rises by 1 [1, 1] (n=3) bits per byte from 64 to 256" in section(text, "C5")


def _body_of(text: str) -> str:
    return text.split("## The seed document's claims", 1)[1].rsplit("\n---\nWritten ", 1)[0]


def test_a_renamed_sweep_without_its_table_stops_the_report_in_one_line_naming_it(tmp_path):
    collected, meta = suite_meta(renamed_quick_suite(tmp_path, table=False))
    collected["text_lm"] = collected.pop("extrapolation_text", tables()["extrapolation_text"])  # collect's name
    with pytest.raises(UserError) as info:
        write_report(collected, meta, tmp_path / "out")
    assert str(info.value) == (
        "the report reads the table 'extrapolation_text', which no sweep of the suite fills: give the sweep "
        "that runs experiment=extrapolation task=text the line `table: extrapolation_text`; the suite fills "
        "text_lm (text_lm), which the report does not read"
    )
    assert not (tmp_path / "out").exists()


def test_a_sweep_left_out_with_only_is_reported_as_not_run(tmp_path):
    path = ROOT / "configs" / "suite" / "quick.yaml"
    collected, meta = suite_meta(path, only=("order", "check", "resolution", "resolution_relational"))
    assert "extrapolation_text" not in collected and meta["left_out"]["extrapolation_text"] == "extrapolation_text"
    text = write_report(collected, meta, tmp_path).read_text()
    assert "Not measured: the table `extrapolation_text` was not run" in section(text, "C5")
    assert "Not measured" not in section(text, "C1")


def test_every_report_table_comes_from_a_table_its_protocol_declares():
    from posenc.reporting.literature import finding
    from posenc.reporting.tables import REPORT_TABLES

    names = {t.name for t in REPORT_TABLES}
    for t in REPORT_TABLES:
        spec = t.spec()  # the protocol of experiment=<t.experiment> declares it
        assert spec.name == (t.source or spec.name) and (t.side_of in names if t.side_of else t.fill), t
    assert set(finding("ViT").subject("tasks")) <= names
    # every built-in suite fills every table the report reads
    from posenc.launch.suite import load
    from posenc.reporting.tables import check_tables

    for suite in ("quick", "standard", "full"):
        filled: dict[str, list[str]] = {}
        for spec in load(suite).sweeps:
            filled.setdefault(spec.table, []).append(spec.name)
        check_tables(filled)


def test_a_suite_that_fills_none_of_the_reports_tables_gets_no_reference_report(tmp_path):
    from posenc.reporting.tables import check_tables

    assert check_tables({"train": ["train"]}) is False  # a researcher's own suite: its sweeps, no report
    with pytest.raises(UserError, match="^no reference report: the suite fills none of the tables it reads$"):
        write_report(
            {"train": pd.DataFrame({"pe": ["rope"]})}, META | {"sweeps": {"train": {}}, "left_out": {}}, tmp_path
        )
    assert not (tmp_path / "REPORT.md").exists()


def test_the_prose_follows_the_numbers_it_could_contradict():
    """Every sentence the numbers could contradict is chosen by them: ALiBi "stays flat" only when
    TOST shows its rise inside ±0.02 bits (else "improves" or "not shown"); raw extrapolation
    "breaks down" only when its bits per byte reach the corpus's unigram baseline; two rescalings
    identical in every seed are tied, not ordered."""
    flat = section(render(tables(), META), "ALiBi")
    assert "alibi stays flat (its rise is shown inside ±0.02 bits by TOST)" in flat
    falls = section(render(tables(extrapolation_text=extrapolation_text(alibi_rise=-0.1)), META), "ALiBi")
    assert "alibi improves (its rise -0.1 [-0.1, -0.1] (n=3) is shown below −0.02)" in falls
    assert "**Verdict:** agrees" in falls
    rises = section(render(tables(extrapolation_text=extrapolation_text(alibi_rise=0.03)), META), "ALiBi")
    assert "alibi is not shown to stay flat within ±0.02 bits" in rises and "**Verdict:** disagrees" in rises
    for unigram, words in (
        (
            3.5,
            "Raw extrapolation breaks down here too: unscaled rope scores 4 bits per byte at 256, at "
            "or above the unigram baseline of the corpus (a model that knows only byte frequencies), 3.5",
        ),
        (4.5, "Raw extrapolation stays below the corpus's unigram baseline of 4.5 bits per byte here"),
    ):
        t = extrapolation_text().assign(unigram_bpb=unigram)
        text = render(tables(extrapolation_text=t), META)
        assert words in section(text, "PI")
        broken = "lie at or above the corpus's unigram baseline of 3.5: those models no longer use"
        assert (broken in section(text, "C5")) == (unigram == 3.5)
    t = extrapolation_text()
    yarn, ntk = (t["pe"] == "rope") & (t["scale"] == "yarn"), (t["pe"] == "rope") & (t["scale"] == "ntk")
    t.loc[yarn, ["64", "128", "256"]] = t.loc[ntk, ["64", "128", "256"]].to_numpy()
    c11 = section(render(tables(extrapolation_text=t), META), "C11")
    assert "the order from best to worst is ntk = yarn < none < pi (= : identical in every seed)" in c11
