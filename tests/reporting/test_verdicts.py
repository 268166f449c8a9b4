"""Verdicts as tests (posenc.reporting.estimates.Test, Family): three outcomes, Holm within a family,
TOST for "≈", the minimum detectable effect at n; and the report's verdict table, one verdict per
model size in a scale sweep, item counts and the held-out split read from the tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats as scipy_stats

from posenc.reporting.estimates import ACCURACY_GAP, Effect, Estimate, Family, accuracy
from posenc.reporting.estimates import Test as Claim  # not a pytest class
from posenc.reporting.reference_report import render

SEEDS = range(5)


def arms(diffs: list[float]) -> tuple[dict[int, float], dict[int, float]]:
    """Two arms whose per-seed difference a − b is ``diffs`` (b at 0.5)."""
    return {s: 0.5 + d for s, d in zip(SEEDS, diffs)}, dict.fromkeys(SEEDS, 0.5)


CLEAR, NOISY, ZERO = [0.1, 0.12, 0.09, 0.11, 0.1], [0.3, -0.2, 0.1, -0.1, 0.15], [0.001, -0.002, 0.0, 0.002, -0.001]


@pytest.mark.parametrize(
    ("relation", "diffs", "outcome"),
    [
        (">", CLEAR, "agrees"),
        ("<", CLEAR, "disagrees"),  # shown, in the opposite direction
        (">", NOISY, "inconclusive"),  # a null is not a disagreement
        ("≈", ZERO, "agrees"),  # TOST within ±0.02
        ("≈", CLEAR, "disagrees"),  # shown beyond the margin
        ("≈", NOISY, "inconclusive"),
        ("≲", ZERO, "agrees"),
        ("≲", CLEAR, "disagrees"),
        ("≳", [-d for d in CLEAR], "disagrees"),
    ],
)
def test_three_outcomes(relation, diffs, outcome):
    t = Claim.of("a − b", relation, *arms(diffs), margin=0.02)
    assert t.outcome(t.p) == outcome
    assert Family("F", [t]).verdict == outcome


def test_the_family_corrects_with_holm_and_the_verdict_needs_every_test():
    """p-values 0.0086 and 0.039 alone are below 0.05; with six more nulls Holm lifts them above it,
    so the family cannot tell (the review's NoPE at 512 tokens)."""
    strong, weak = Claim.of("x", ">", *arms(CLEAR)), Claim.of("y", ">", *arms([0.2, 0.05, 0.1, 0.0, 0.12]))
    nulls = [Claim.of(f"n{i}", ">", *arms(NOISY)) for i in range(6)]
    family = Family("F", [strong, weak, *nulls])
    raw = [t.p for t in family.tests]
    expected = sorted(raw)
    holm = [max(min(1.0, (8 - j) * expected[j]) for j in range(i + 1)) for i in range(8)]
    assert sorted(family.adjusted) == pytest.approx(holm)
    assert weak.p < 0.05 and family.outcomes()[1] == "inconclusive" and family.outcomes()[0] == "agrees"
    assert family.verdict == "inconclusive" and family.counts() == "1 agree, 7 inconclusive of 8 tests"
    assert family.level == pytest.approx(0.05 / 8) and family.correction_words() == "Holm over 8 tests, α = 0.05"
    bh = Family("F", [strong, weak, *nulls], correction="bh")
    assert bh.adjusted[1] <= family.adjusted[1]  # BH never stricter than Holm
    with pytest.raises(ValueError, match="correction must be one of holm, bh"):
        Family("F", [strong], correction="bonferroni")


def test_a_comparison_under_two_seeds_is_untested_and_equal_differences_size_no_effect():
    """A scheme that learned in one seed leaves a paired test nothing to test: it is listed as
    untested, counted apart, outside the correction, and keeps the family from agreeing. Two arms
    at 0 in every seed (both fail at 2L) give no spread to size a detectable effect from."""
    one = Claim.of("one", ">", {0: 0.6}, {0: 0.3, 1: 0.3})
    zeros = Claim.of("zeros", ">", dict.fromkeys(SEEDS, 0.0), dict.fromkeys(SEEDS, 0.0))
    family = Family("F", [Claim.of("x", ">", *arms(CLEAR)), one, zeros])
    assert family.counts() == "1 agree, 1 inconclusive of 2 tests; 1 untested (under 2 seeds)"
    assert family.correction_words() == "Holm over 2 tests, α = 0.05" and family.verdict == "inconclusive"
    assert family.seeds() == "5"
    lines = family.lines()
    assert lines[1] == "- one > 0: 0.3 (n=1); untested: 1 seed with both arms (a paired test needs 2)."
    assert lines[2].endswith("→ **inconclusive**; detectable at n=5: — (every seed's difference is 0).")
    assert family.mde_range() == family.lines()[0].split("detectable at n=5: ")[1].rstrip(".")


def test_each_line_prints_the_test_its_p_values_and_the_minimum_detectable_effect_beside_the_paper():
    a, b = arms(NOISY)
    effect = Effect(-0.028, "none − 1D", "table 8")
    family = Family("F", [Claim.of("a − b", "<", a, b, effect=effect)])
    (line,) = family.lines()
    sd = float(pd.Series(NOISY).std())
    mde = (scipy_stats.t.ppf(1 - 0.025, 4) + scipy_stats.t.ppf(0.8, 4)) * sd / math.sqrt(5)
    p = scipy_stats.ttest_1samp(NOISY, 0).pvalue
    assert f"paired t, p = {p:.2g}, corrected {p:.2g} → **inconclusive**" in line
    assert (
        f"detectable at n=5: {mde:.3g}; the paper's effect -0.028 (none − 1D; table 8) — underpowered for it." in line
    )


def test_a_test_needs_a_margin_for_equivalence_and_a_known_relation():
    with pytest.raises(ValueError, match="'≈' needs an equivalence margin"):
        Claim.of("a − b", "≈", *arms(ZERO))
    with pytest.raises(ValueError, match="relation must be one of"):
        Claim.of("a − b", "!=", *arms(ZERO))


def test_an_accuracy_carries_its_items_or_says_the_bootstrap_stands_in():
    """A table with an ``items`` column: the interval uses the items (Haldane logit + Wilson) and
    says so; without it, seeds at 1.0 fall back to the bootstrap, and the line says the items are
    unknown (the review's "rope2d_axial 1 [1, 1]")."""
    t = pd.DataFrame({"seed": list(SEEDS), "acc": [1.0] * 5, "items": [512] * 5})
    with_items = accuracy(t, "acc")
    assert str(with_items).endswith("(n=5, 512 items)") and 0.998 < with_items.low < 1
    assert with_items == Estimate.accuracy([1.0] * 5, 512)
    without = accuracy(t.drop(columns="items"), "acc")
    assert str(without) == "1 [1, 1] (n=5, items unknown: bootstrap over seeds)"


def test_a_paired_accuracy_difference_stays_inside_what_its_base_allows():
    """The review's rope2d_axial at 48 px: +0.00156 on a 0.998 base printed an upper bound 0.0059."""
    base = {s: 0.998 for s in SEEDS}
    gain = Estimate.paired({0: 1.0, 1: 1.0, 2: 0.998, 3: 0.996, 4: 0.998}, base, ACCURACY_GAP)
    assert gain.high == pytest.approx(0.002) and gain.low > -0.998


# --- the report: verdict table, scale, splits ---------------------------------------------------


def passkey(sizes=(None,), metric_rows=("accuracy",), split=False) -> pd.DataFrame:
    """NoPE above every scheme at 64 and 512 tokens (trained at 32), by 0.3 in every seed."""
    rows = []
    for size in sizes:
        for pe in ("nope", "rope", "alibi"):
            for metric in metric_rows:
                for seed in SEEDS:
                    for which in ("test", "val") if split else ("test",):
                        far = (0.6 if pe == "nope" else 0.3) + 0.01 * seed
                        if size == 100_000 and pe == "rope":
                            far = 0.9  # at the larger size rope wins
                        rows.append(
                            {
                                "pe": pe,
                                "seed": seed,
                                "scale": "none",
                                "finetune_steps": 0,
                                "metric": metric,
                                "32": 0.95,
                                "64": far if which == "test" else 0.0,
                                "512": far if which == "test" else 0.0,
                                "items": 64,
                                "chance": 0.1 if metric == "accuracy" else 1e-5,
                                # NoPE's deeper LM has more parameters than the others at one size
                                **({"params": size * (3 if pe == "nope" else 2)} if size is not None else {}),
                                **({"split": which} if split else {}),
                                "status": "completed",
                            }
                        )
    return pd.DataFrame(rows)


META = {"suite": "t", "seeds": list(SEEDS), "sweeps": {}, "left_out": {}}


def nope_section(text: str) -> str:
    return text.split("### NoPE")[1]


def test_the_verdict_table_names_the_verdict_test_correction_n_and_mde():
    text = render({"extrapolation_passkey": passkey()}, META)
    table = text.split("## Verdicts")[1].split("## The seed")[0]
    for label in ("at 2× (64 tokens, the paper's protocol)", "at 512 tokens"):
        row = next(line for line in table.splitlines() if f"NoPE, {label}" in line)
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:8] == ["agrees", "2 agree of 2 tests", "paired t", "Holm over 2 tests, α = 0.05", "5", "64", "—"]
    body = nope_section(text)
    assert "Passkey accuracy at 32 → 512 tokens (no rescaling; chance 0.1)" in body
    assert "nope 0.95 [" in body and "(n=5, 64 items)" in body


def test_exact_match_is_the_primary_metric_where_the_table_records_it():
    text = render({"extrapolation_passkey": passkey(metric_rows=("accuracy", "exact_match"))}, META)
    assert "Passkey exact match at 32 → 512 tokens (no rescaling; chance 1e-05)" in nope_section(text)


def test_only_the_test_split_is_read_where_the_table_names_its_split():
    """The validation rows (0.0 everywhere here) stop training; the report reads the test split."""
    text = render({"extrapolation_passkey": passkey(split=True)}, META)
    assert "nope 0.95 [" in nope_section(text) and "→ 0.62 [" in nope_section(text)
    assert "→ 0 [" not in nope_section(text)


def algorithmic() -> pd.DataFrame:
    """Copy (no chance level declared) at 32 and 64 and parity (chance 0.5) at 6 and 12, NoPE
    ahead of rope at 2L by 0.2 in every seed."""
    rows = []
    for task, (short, long), chance in (("copy", ("32", "64"), None), ("parity", ("6", "12"), 0.5)):
        for pe in ("nope", "rope"):
            for seed in SEEDS:
                rows.append(
                    {
                        "pe": pe,
                        "task": task,
                        "seed": seed,
                        "scale": "none",
                        "finetune_steps": 0,
                        "metric": "exact_match",
                        short: 1.0,
                        long: (0.7 if pe == "nope" else 0.5) + 0.01 * seed,
                        "items": 256,
                        "chance": chance,
                        "split": "test",
                        "reached_target": not (pe == "rope" and seed == 4),
                        "status": "completed",
                    }
                )
    return pd.DataFrame(rows)


def test_each_algorithmic_task_shows_its_own_chance_level_and_joins_one_family():
    """Two tasks with different chance levels: the table gives each task's beside its rows, not one
    level for the whole table, NoPE's family holds one test per task, and the runs under target are
    named by task."""
    text = render({"algorithmic": algorithmic()}, META)
    body = nope_section(text)
    # each run named once, by its task: not "rope (seed 4, 4)"
    assert "- `algorithmic`: 2 did not learn — copy rope (seed 4); parity rope (seed 4)." in text
    table = [line for line in body.splitlines() if line.startswith("| copy") or line.startswith("| parity")]
    assert len(table) == 4
    assert all(line.rstrip(" |").endswith("—") for line in table if line.startswith("| copy"))
    assert all(line.rstrip(" |").endswith("0.5") for line in table if line.startswith("| parity"))
    assert "chance 0.5 (" not in body  # no single level for the table
    assert "**Verdict:** agrees at 2L (2 agree of 2 tests;" in body
    assert "- copy: nope − rope at 64 > 0" in body and "- parity: nope − rope at 12 > 0" in body


def text_rows(sizes, nope_rise=(0.1, 0.9)) -> pd.DataFrame:
    """Bits per byte at 64 (trained) and 1024 bytes: NoPE rises by ``nope_rise[i]`` at size i,
    rope and alibi by about 0.5; NoPE's deeper LM has 1.5× the others' parameters at one size."""
    rows = []
    for size, up in zip(sizes, nope_rise):
        for pe in ("nope", "rope", "alibi"):
            for seed in SEEDS:
                rise = up + 0.02 * (seed % 2) if pe == "nope" else 0.5 + 0.01 * seed
                rows.append(
                    {
                        "pe": pe,
                        "seed": seed,
                        "scale": "none",
                        "finetune_steps": 0,
                        "metric": "bpb",
                        "64": 2.0,
                        "1024": 2.0 + rise,
                        "unigram_bpb": 4.7,
                        "params": size * (3 if pe == "nope" else 2),
                        "status": "completed",
                    }
                )
    return pd.DataFrame(rows)


def test_a_scale_sweep_reads_each_verdict_at_every_size_and_says_whether_it_moves():
    """The scale sweep's table at two sizes 100× apart (within each, NoPE's deeper LM is the same
    size, not a size of its own): NoPE's text family agrees at the small size, disagrees at the
    large one; the main table holds the large size only."""
    tables = {
        "extrapolation_text": text_rows((100_000,), (0.9,)),
        "extrapolation_text_scale": text_rows((1000, 100_000)),
    }
    text = render(tables, META)
    table = text.split("## Verdicts")[1].split("## Model size")[0]
    row = next(line for line in table.splitlines() if "| NoPE, text rise at 16× " in line)
    assert row.split("|")[2].strip() == "disagrees"
    assert row.rstrip(" |").endswith("2k params: agrees; 200k params: disagrees")
    trend = text.split("## Model size and training budget")[1].split("## The seed")[0]
    assert "- NoPE, text rise at 16×: moves with scale — 2k params agrees; 200k params disagrees." in trend
    assert "### 2k params" in trend and "### 200k params" in trend
    # the sections are written once, at the main tables' size
    assert text.count("### NoPE — ") == 1 and text.count("### C4 — ") == 1
    # one size: no trend
    assert "## Model size" not in render({"extrapolation_text": text_rows((1000,), (0.1,))}, META)


def test_the_fixed_budget_tables_are_read_beside_the_trained_to_criterion_ones():
    tables = {"extrapolation_passkey": passkey(), "extrapolation_passkey_fixed": passkey().assign(steps=2500)}
    text = render(tables, META)
    trend = text.split("## Model size and training budget")[1].split("## The seed")[0]
    assert "### fixed budget (passkey 2500 steps)" in trend
    row = next(line for line in trend.splitlines() if "| NoPE, at 512 tokens " in line)
    assert "agrees (2 agree of 2 tests; detectable —)" in row  # every seed 0.3 apart: no spread


def test_the_correction_and_level_come_from_the_data_file(tmp_path, monkeypatch):
    """configs/findings.yaml's ``verdicts:`` sets every family's correction (holm, or bh) and level;
    a value outside them is one clear line."""
    from posenc.core.errors import ConfigError
    from posenc.reporting import literature

    family = Family("F", [Claim.of("a − b", ">", *arms(CLEAR))])
    assert (family.correction, family.alpha) == ("holm", 0.05)
    monkeypatch.setattr(literature, "config_root", lambda: tmp_path)
    for text, expected in (("verdicts: {correction: bh, alpha: 0.1}", ("bh", 0.1)), ("{}", ("holm", 0.05))):
        (tmp_path / "findings.yaml").write_text(text)
        literature.verdict_settings.cache_clear()
        family = Family("F", [Claim.of("a − b", ">", *arms(CLEAR))])
        assert (family.correction, family.alpha) == expected
    (tmp_path / "findings.yaml").write_text("verdicts: {correction: bonferroni}")
    literature.verdict_settings.cache_clear()
    with pytest.raises(ConfigError, match="verdicts.correction must be holm or bh"):
        Family("F", [])
    literature.verdict_settings.cache_clear()


def test_a_size_reads_only_the_lengths_it_was_scored_at():
    """The scale sweep scores 64 and 1024; the main table (another size) also 128: the small
    size's view has no all-empty 128 column, which would make every span that spans it empty."""
    from posenc.reporting.reference_report import variants

    tables = {
        "extrapolation_text": text_rows((100_000,), (0.9,)).assign(**{"128": 2.2}),
        "extrapolation_text_scale": text_rows((1000,), (0.1,)),
    }
    views = dict(variants(tables))
    assert set(views) == {"2k params", "200k params"}
    assert "128" not in views["2k params"]["extrapolation_text"]
    assert "128" in views["200k params"]["extrapolation_text"]


def test_the_report_names_the_sweeps_a_run_left_out():
    from posenc.reporting.reference_report import _meta_lines

    meta = {"suite": "standard", "seconds": 60.0, "sweeps": {"order": {"jobs": 5, "seconds": 60.0, "description": "o"}}}
    assert not any(line.startswith("Not run") for line in _meta_lines(meta))
    meta["left_out"] = {"extrapolation_text_fixed": "extrapolation_text_fixed", "check": "check"}
    (line,) = [line for line in _meta_lines(meta) if line.startswith("Not run")]
    assert line.endswith(": `check`, `extrapolation_text_fixed`.")


def test_a_table_filled_by_several_tasks_names_each_tasks_model_once():
    """The algorithmic table: addition and parity at 2 layers, copy and reverse at 4 (and another
    sequence length, which is the task's, not the model's): one clause for the deeper tasks."""
    from posenc.reporting.tables import about

    def sweep(task: str, layers: int, seq_len: int) -> dict:
        model = {"d_model": 64, "n_layers": layers, "name": "lm_tiny", "steps": 3000, "seq_len": seq_len}
        return {"table": "algorithmic", "model": model, "overrides": ["pe=nope,rope", f"task={task}"]}

    sweeps = {
        "algorithmic_addition": sweep("addition", 2, 14),
        "algorithmic_copy": sweep("copy", 4, 32),
        "algorithmic_parity": sweep("parity", 2, 6),
        "algorithmic_reverse": sweep("reverse", 4, 32),
    }
    words = about(META | {"sweeps": sweeps}, "algorithmic", algorithmic())["model"]
    assert words == "2-layer, 64-wide model (lm_tiny, at most 3000 training steps; copy, reverse 4-layer, 64-wide)"
