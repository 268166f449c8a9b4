"""The seed document's claims C1–C12, each read from the reference suite's tables.

Input: the long tables ``posenc.launch.suite.collect`` makes (one row per table row of every job, with
its ``seed``): ``extrapolation_text``, ``extrapolation_target``, ``extrapolation_passkey``,
``resolution``, ``resolution_similarity``, ``order``, ``check``. Every number is a mean over
seeds with its 95% Student-t interval (``posenc.analysis.stats``); a verdict is computed from the
intervals, never written in advance: "holds" needs the interval to clear the threshold, overlap
means "not separated". A table that is missing (a sweep not run) makes its sections say so
instead of failing. ``posenc.reporting.findings`` sets the same tables beside the published results;
``posenc.reporting.reference_report`` writes REPORT.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from posenc.analysis.stats import summarize

TOL = 1e-5  # posenc.experiments.order.INVARIANCE_TOL: float32 sums in another order


# --- numbers -------------------------------------------------------------------------------------

@dataclass
class Estimate:
    """Mean over seeds and its 95% interval (NaN bounds with one seed)."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate:
        s = summarize(list(values))
        return cls(s["mean"], s["ci95_low"], s["ci95_high"], s["n"])

    def __str__(self) -> str:
        if self.n == 0:
            return "—"
        if math.isnan(self.low):
            return f"{self.mean:.3g}"
        return f"{self.mean:.3g} [{self.low:.3g}, {self.high:.3g}]"

    def above(self, x: float) -> bool:
        """The interval lies above x (one seed: the value does)."""
        return self.n > 0 and (self.low if not math.isnan(self.low) else self.mean) > x

    def below(self, x: float) -> bool:
        return self.n > 0 and (self.high if not math.isnan(self.high) else self.mean) < x


def lengths(table: pd.DataFrame) -> list[str]:
    """The length columns of an extrapolation table (``"64"``, ``"128"``, …), ascending."""
    return sorted((c for c in table.columns if str(c).isdigit()), key=int)


def pixels(table: pd.DataFrame) -> list[str]:
    """The resolution columns of a resolution table (``"16px"``, …), ascending."""
    return sorted((c for c in table.columns if str(c).endswith("px") and str(c)[:-2].isdigit()), key=lambda c: int(c[:-2]))


def completed(table: pd.DataFrame | None) -> pd.DataFrame | None:
    if table is None:
        return None
    return table[table["status"] == "completed"] if "status" in table else table


def select(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    for key, value in where.items():
        table = table[table[key] == value]
    return table


def estimate(table: pd.DataFrame, column: str, **where: Any) -> Estimate:
    """Over seeds: the mean of ``column`` in the rows matching ``where`` (one value per seed)."""
    part = select(table, **where)
    if column not in part:
        return Estimate.of([])
    per_seed = part.groupby("seed")[column].mean() if "seed" in part else part[column]
    return Estimate.of(per_seed.dropna().tolist())


def difference(table: pd.DataFrame, a: str, b: str, **where: Any) -> Estimate:
    """Over seeds: column ``a`` minus column ``b`` (paired within each seed)."""
    part = select(table, **where)
    if a not in part or b not in part:
        return Estimate.of([])
    per_seed = (part[a] - part[b]).groupby(part["seed"]).mean() if "seed" in part else part[a] - part[b]
    return Estimate.of(per_seed.dropna().tolist())


def md(table: pd.DataFrame) -> str:
    return table.to_markdown(index=False, floatfmt=".3g")


# --- the report's parts ----------------------------------------------------------------------------

@dataclass
class Section:
    key: str  # "C5" or a paper's short name
    title: str
    statement: str
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        body: list[str] = []
        for line in self.lines:  # a paragraph per line, tables kept whole
            if body and body[-1] and line and not (body[-1].startswith("|") and line.startswith("|")):
                body.append("")
            body.append(line)
        return "\n".join([f"### {self.key} — {self.title}", "", f"*{self.statement}*", "", *body, ""])


def missing(name: str) -> list[str]:
    return [f"Not measured: the suite's `{name}` sweep is missing from this run (`posenc suite --only …`?)."]


Tables = dict[str, pd.DataFrame]


def ext_table(tables: Tables, name: str = "extrapolation_text") -> pd.DataFrame | None:
    t = completed(tables.get(name))
    if t is None or not len(t):
        return None
    return t[t["finetune_steps"] == 0] if "finetune_steps" in t else t


def extrapolation_table(t: pd.DataFrame, metric: str) -> pd.DataFrame:
    """(pe, scale) × length: mean [95% interval] of ``metric`` over seeds."""
    rows = []
    for (pe, scale), part in t[t["metric"] == metric].groupby(["pe", "scale"], sort=False):
        rows.append({"pe": pe, "scale": scale, **{n: str(estimate(part, n)) for n in lengths(t)}})
    return pd.DataFrame(rows)


def multiple(t: pd.DataFrame) -> str:
    """The longest evaluated length as a multiple of the training length (``16×``)."""
    ns = lengths(t)
    return f"{int(ns[-1]) / int(ns[0]):g}×"


def rise(t: pd.DataFrame, pe: str, scale: str = "none", metric: str = "bpb") -> Estimate:
    """Longest evaluated length minus the training length, paired by seed."""
    ns = lengths(t)
    return difference(t, ns[-1], ns[0], pe=pe, scale=scale, metric=metric)


# C1, C2, C9 (order) ------------------------------------------------------------------------------

def order_rows(tables: Tables) -> pd.DataFrame | None:
    t = completed(tables.get("order"))
    return t if t is not None and len(t) else None


def order_summary(t: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (model, attention, pe), part in t.groupby(["model", "attention", "pe"], sort=False):
        row = {"model": model, "attention": attention, "pe": pe}
        for phase in ("init", "trained"):
            p = part[part["phase"] == phase]
            row[f"residual {phase} (max over seeds)"] = float(p["equivariance_residual"].max())
        row["trained accuracy"] = str(estimate(part, "accuracy", phase="trained"))
        row["chance (95% bound)"] = f"{part['chance'].mean():.3g} ({part['chance_95'].max():.3g})"
        rows.append(row)
    return pd.DataFrame(rows)


def c1(tables: Tables) -> Section:
    s = Section("C1", "without positions, self-attention is permutation-equivariant",
                "Permuting the tokens (patches) of a bidirectional model without positions permutes its outputs the same way.")
    t = order_rows(tables)
    if t is None:
        s.lines = missing("order")
        return s
    s.lines = ["Test: `posenc order` — the relative change ‖f(Px) − P·f(x)‖/‖f(x)‖ over 8 random permutations, at "
               "initialization and after training on the order task (same tokens, label depends only on order); "
               "table `suite/order.csv`, plot `suite/order.png`.", "", md(order_summary(t)), ""]
    blind = t[(t["pe"] == "nope") & (t["attention"] == "bidirectional")]
    others = t[(t["pe"] != "nope") & (t["attention"] == "bidirectional")]
    if len(blind):
        worst = float(blind["equivariance_residual"].max())
        least = float(others[others["phase"] == "init"]["equivariance_residual"].min()) if len(others) else float("nan")
        holds = worst <= TOL
        reads = []
        for model, part in blind.groupby("model", sort=False):
            acc, chance = estimate(part, "accuracy", phase="trained"), float(part["chance_95"].max())
            reads.append(f"{model} {acc} (chance bound {chance:.3g}: "
                         f"{'above, which equivariance forbids' if acc.above(chance) else 'it cannot read order'})")
        s.lines.append(f"**Shows:** every bidirectional model without positions, at init and trained, in every seed, "
                       f"moves by at most {worst:.2g} (tolerance {TOL:g}: float32 sums in another order) — "
                       f"{'equivariant, as claimed' if holds else 'NOT equivariant: a bug or a leak of position'}. "
                       f"Trained on the order task they reach {'; '.join(reads)}. "
                       f"Every scheme with positions moves by at least {least:.2g} at init.")
    return s


def c2(tables: Tables) -> Section:
    s = Section("C2", "a causal mask separates past and future, but not distance",
                "With a causal mask and no positions (NoPE), output i sees only tokens ≤ i: order becomes visible.")
    t = order_rows(tables)
    if t is None:
        s.lines = missing("order")
        return s
    causal = t[(t["pe"] == "nope") & (t["attention"] == "causal") & (t["model"] == "lm_tiny")]
    bidir = t[(t["pe"] == "nope") & (t["attention"] == "bidirectional") & (t["model"] == "lm_tiny")]
    if not len(causal):
        s.lines = ["Not measured: the order sweep has no causal NoPE model."]
        return s
    res = estimate(causal, "equivariance_residual", phase="init")
    acc_c, acc_b = estimate(causal, "accuracy", phase="trained"), estimate(bidir, "accuracy", phase="trained")
    chance = float(causal["chance_95"].max())
    s.lines = [
        "Test: the same order table (C1), the causal LM without positions against the same LM without its mask.", "",
        f"**Shows:** the causal NoPE model is not permutation-equivariant (residual {res} at init, tolerance {TOL:g}); "
        f"trained on the order task it reaches {acc_c} accuracy against {acc_b} without the mask (chance bound "
        f"{chance:.3g}). The mask {'lets the model read order' if acc_c.above(chance) else 'did not make order learnable here'}.",
        "", "The order task labels which of two tokens comes first, so it cannot tell order from distance; how far NoPE "
        "gets on distance shows in its length behaviour (C5, NoPE below): a causal model can count its context "
        "(Kazemnejad et al. 2023), which is position information the claim's \"not distance\" understates."]
    return s


# C3, C5, C10, C11 (extrapolation) ----------------------------------------------------------------

def c3(tables: Tables) -> Section:
    s = Section("C3", "a learned table is tied to its maximum length and grid",
                "A learned absolute table has rows for the positions it was trained on and nothing beyond them.")
    t = ext_table(tables)
    lines = []
    if t is not None:
        learned = select(t, pe="learned", scale="none", metric="bpb")
        ns = lengths(t)
        beyond = [n for n in ns[1:] if learned[n].isna().all()] if len(learned) else []
        lines.append(f"Text (`suite/extrapolation_text.csv`): the learned table scores {estimate(learned, ns[0])} bits "
                     f"per byte at the training length {ns[0]}; at {', '.join(beyond) or 'no longer length'} it cannot be "
                     "evaluated at all (no rows: `PositionOutOfRange`, NaN in the table) — the model has no input for "
                     "those positions.")
    r = completed(tables.get("resolution"))
    if r is not None and len(r):
        cols, trained_at = pixels(r), train_px(r)
        parts = []
        for pe in ("learned", "learned2d"):
            for method in ("bilinear", "bicubic"):
                p = select(r, pe=pe, method=method, finetune_steps=0)
                if len(p):
                    parts.append(f"{pe}/{method}: " + ", ".join(f"{c} {estimate(p, c)}" for c in cols))
        lines.append(f"Images (`suite/resolution.csv`): a table trained on the {trained_at} grid must be resampled to "
                     "be used on another; accuracy without fine-tune — " + "; ".join(parts) + ".")
    s.lines = lines or missing("extrapolation_text")
    return s


def c5(tables: Tables) -> Section:
    s = Section("C5", "a formula defined at every position does not make the model generalize there",
                "Sinusoidal tables and RoPE are defined at any position, yet a model trained at length L has never seen the longer ones.")
    t = ext_table(tables)
    if t is None:
        s.lines = missing("extrapolation_text")
        return s
    ns = lengths(t)
    s.lines = [f"Test: `posenc extrapolate` — bits per byte of the byte-level LM trained at {ns[0]} bytes, scored at "
               f"{', '.join(ns)}; table `suite/extrapolation_text.csv`, plot below.", "",
               md(extrapolation_table(t[t["scale"] == "none"], "bpb")), "",
               "![bits per byte against length](suite/extrapolation_text.png)", ""]
    verdicts = []
    for pe in ("sinusoidal", "rope"):
        d = rise(t, pe)
        verdicts.append(f"{pe} rises by {d} bits per byte from {ns[0]} to {ns[-1]} "
                        f"({'it does not generalize' if d.above(0) else 'not separated from no change'})")
    s.lines.append("**Shows:** " + "; ".join(verdicts) + ".")
    return s


def c10(tables: Tables) -> Section:
    s = Section("C10", "many frequencies delay periodicity; long positions are unseen phase combinations",
                "With d/2 frequencies the rotation angles never repeat together in practice, so positions past L give "
                "combinations of phases that training never showed.")
    lines = check_lines(tables, "C10")
    t = ext_table(tables)
    if t is not None:
        d = rise(t, "rope")
        lines.append(f"Extrapolation: RoPE without rescaling rises by {d} bits per byte at {lengths(t)[-1]} bytes — the "
                     "unseen phase combinations are where it fails (see the per-position loss in the sweep's runs).")
    s.lines = lines
    return s


SCALES = ("none", "pi", "ntk", "yarn")


def c11(tables: Tables) -> Section:
    s = Section("C11", "PI, NTK-aware and YaRN rescale the coordinate system",
                "Rescaling RoPE's positions (PI) or frequencies (NTK, YaRN) maps a longer context into the trained range.")
    t = ext_table(tables)
    if t is None:
        s.lines = missing("extrapolation_text")
        return s
    rope = t[(t["pe"] == "rope") & t["scale"].isin(SCALES)]
    ns = lengths(t)
    s.lines = ["Test: the RoPE model of C5 scored with each rescaling, factor = evaluated length / training length "
               "(no fine-tune); bits per byte:", "", md(extrapolation_table(rope, "bpb")), ""]
    p = ext_table(tables, "extrapolation_passkey")
    if p is not None:
        s.lines += ["Passkey retrieval (answer accuracy; `suite/extrapolation_passkey.csv`):", "",
                    md(extrapolation_table(p[(p["pe"] == "rope") & p["scale"].isin(SCALES)], "accuracy")), ""]
    best = {sc: estimate(rope, ns[-1], scale=sc, metric="bpb") for sc in SCALES}
    order = sorted((sc for sc in SCALES if best[sc].n), key=lambda sc: best[sc].mean)
    s.lines.append(f"**Shows:** at {ns[-1]} bytes the order from best to worst is {' < '.join(order)} "
                   f"({'; '.join(f'{sc} {best[sc]}' for sc in order)}).")
    return s


# C4, C8, C9 (check) -----------------------------------------------------------------------------

def check_lines(tables: Tables, claim: str) -> list[str]:
    t = completed(tables.get("check"))
    if t is None or not len(t):
        return missing("check")
    part = t[t["claim"] == claim]
    if not len(part):
        return [f"`posenc check` measured nothing for {claim}."]
    rows = []
    for (check, pe), p in part.groupby(["check", "pe"], sort=False):
        rows.append({"check": check, "pe": pe, "measured (worst seed)": _worst(p), "criterion":
                     f"{p['criterion'].iloc[0]} {p['tolerance'].iloc[0]:.3g}",
                     "passed": f"{int(p['passed'].astype(bool).sum())}/{len(p)} seeds"})
    n_pass = int(part["passed"].astype(bool).sum())
    return ["Test: `posenc check` (table `suite/check.csv`; one row per scheme and check, every seed):", "",
            md(pd.DataFrame(rows)), "",
            f"**Shows:** {n_pass} of {len(part)} measurements pass "
            + ("— the claim holds numerically for every scheme it applies to." if n_pass == len(part)
               else "— see the failing rows above.")]


def _worst(p: pd.DataFrame) -> float:
    at_most = p["criterion"].iloc[0] == "≤"
    return float(p["measured"].max() if at_most else p["measured"].min())


def c4(tables: Tables) -> Section:
    s = Section("C4", "sinusoidal PE(pos+Δ) is a linear map of PE(pos) that depends on Δ only",
                "For the sinusoidal table there is, for every offset Δ, one matrix M_Δ with PE(pos+Δ) = M_Δ·PE(pos).")
    s.lines = check_lines(tables, "C4")
    return s


def c8(tables: Tables) -> Section:
    s = Section("C8", "relative biases b(i−j), clipped or bucketed; 2D row and column offsets apart",
                "A relative scheme adds to the attention logit a bias that depends only on the offset i − j "
                "((Δrow, Δcol) for patches).")
    lines = check_lines(tables, "C8")
    t = ext_table(tables)
    if t is not None:
        lines.append("Extrapolation of the bias schemes (rise of bits per byte from the training length to the "
                     "longest): " + "; ".join(f"{pe} {rise(t, pe)}" for pe in ("t5", "alibi", "kerple", "fire")
                                               if len(select(t, pe=pe))) + ".")
    s.lines = lines
    return s


def c9(tables: Tables) -> Section:
    s = Section("C9", "RoPE: q_m·k_n depends only on n − m; rotation keeps norms; only Q and K rotate",
                "Rotating queries and keys by their positions turns absolute rotations into a relative offset.")
    lines = check_lines(tables, "C9")
    t = order_rows(tables)
    if t is not None:
        rope = t[(t["pe"] == "rope") & (t["attention"] == "bidirectional")]
        if len(rope):
            lines.append(f"Order: a bidirectional RoPE model is not permutation-equivariant (residual "
                         f"{estimate(rope, 'equivariance_residual', phase='init')} at init) and learns the order task "
                         f"({estimate(rope, 'accuracy', phase='trained')} accuracy).")
    s.lines = lines
    return s


# C6, C7, C12 (resolution) -----------------------------------------------------------------------

def train_px(r: pd.DataFrame) -> str:
    """The training resolution: the column where every method agrees before fine-tuning."""
    cols = pixels(r)
    p = r[r["finetune_steps"] == 0]
    spread = {c: float(p.groupby(["pe", "seed"])[c].agg(lambda v: v.max() - v.min()).max()) for c in cols}
    return min(cols, key=lambda c: (spread[c], cols.index(c)))


def resolution_table(r: pd.DataFrame, finetune: int) -> pd.DataFrame:
    rows = []
    for (pe, method), part in r[r["finetune_steps"] == finetune].groupby(["pe", "method"], sort=False):
        rows.append({"pe": pe, "method": method, **{c: str(estimate(part, c)) for c in pixels(r)}})
    return pd.DataFrame(rows)


def c6(tables: Tables) -> Section:
    s = Section("C6", "a ViT's learned 1D embeddings learn the 2D structure",
                "After training, the 1D table's rows are most similar for patches that are close on the grid.")
    t = completed(tables.get("resolution_similarity"))
    if t is None or not len(t):
        s.lines = missing("resolution")
        return s
    rows = [{"pe": pe, "rank corr. at init": str(estimate(p, "rank_corr_init")),
             "rank corr. trained": str(estimate(p, "rank_corr_trained")),
             "gain": str(difference(p, "rank_corr_trained", "rank_corr_init"))} for pe, p in t.groupby("pe", sort=False)]
    learned = t[t["pe"] == "learned"]
    gain = difference(learned, "rank_corr_trained", "rank_corr_init")
    s.lines = ["Test: cosine similarity of every pair of position embeddings, Spearman-correlated with minus the grid "
               "distance of the two patches (1: similarity falls with distance); table `suite/resolution_similarity.csv`, "
               "figure `similarity_<pe>.png` in each resolution run.", "", md(pd.DataFrame(rows)), "",
               f"**Shows:** the 1D learned table gains {gain} in rank correlation with grid distance through training — "
               + ("it learned the 2D neighbourhood from data." if gain.above(0) else "not separated from no change at this scale.")]
    return s


def c7(tables: Tables) -> Section:
    s = Section("C7", "a new resolution needs the position grid interpolated (bilinear/bicubic), the cls row kept apart",
                "A table learned on an h×w grid is resampled to the new grid as a 2D image; the cls row is not a grid position.")
    r = completed(tables.get("resolution"))
    if r is None or not len(r):
        s.lines = missing("resolution")
        return s
    steps = sorted(int(x) for x in r["finetune_steps"].dropna().unique())
    s.lines = [f"Test: `posenc resolution` — the ViT trained at {train_px(r)} on shapes labelled by quadrant, accuracy at "
               "each resolution (table `suite/resolution.csv`, plot below). Tables are resampled (bilinear, bicubic), "
               "coordinate schemes interpolate their coordinates onto the trained range or extrapolate them; "
               "the relative table clips.", "", "Without fine-tune:", "", md(resolution_table(r, 0)), ""]
    if len(steps) > 1:
        s.lines += [f"After {steps[-1]} fine-tune steps at each resolution:", "", md(resolution_table(r, steps[-1])), ""]
    s.lines += ["![accuracy against resolution](suite/resolution.png)", ""]
    gains = []
    for pe in ("learned", "learned2d"):
        for c in pixels(r):
            a = select(r, pe=pe, method="bicubic")
            if len(a) and len(steps) > 1:
                ft = a[a["finetune_steps"] == steps[-1]].set_index("seed")[c]
                no = a[a["finetune_steps"] == 0].set_index("seed")[c]
                gains.append((pe, c, Estimate.of((ft - no).dropna().tolist())))
    worst = min(gains, key=lambda g: g[2].mean) if gains else None
    best = max(gains, key=lambda g: g[2].mean) if gains else None
    if best:
        s.lines.append(f"**Shows:** interpolated tables keep most of their accuracy off the training grid; the short "
                       f"fine-tune changes bicubic accuracy by {best[2]} at best ({best[0]}, {best[1]}) and {worst[2]} at "
                       f"worst ({worst[0]}, {worst[1]}).")
    return s


def c12(tables: Tables) -> Section:
    s = Section("C12", "ViT interpolation and RoPE scaling are the same idea",
                "Both move the trained coordinate system to the new scale: resample the grid of positions, or divide "
                "RoPE's positions (PI) or stretch its wavelengths (NTK, YaRN).")
    t, r = ext_table(tables), completed(tables.get("resolution"))
    rows = []
    if r is not None and len(r):
        cols = pixels(r)
        far = cols[-1]
        for pe, methods in (("learned", ("bicubic",)), ("learned2d", ("bicubic",)),
                            ("rope2d_mixed", ("extrapolate", "interpolate")), ("rope2d_axial", ("extrapolate", "interpolate"))):
            for m in methods:
                p = select(r, pe=pe, method=m, finetune_steps=0)
                if len(p):
                    moved = "moved onto the trained grid" if m in ("bicubic", "bilinear", "interpolate") else "raw coordinates"
                    rows.append({"model": "ViT", "scheme": pe, "method": m, "coordinates": moved,
                                 "at": f"{far} (trained {train_px(r)})", "score": f"accuracy {estimate(p, far)}"})
    if t is not None:
        n = lengths(t)[-1]
        for sc in SCALES:
            p = select(t, pe="rope", scale=sc, metric="bpb")
            if len(p):
                moved = "raw positions" if sc == "none" else "moved into the trained range"
                rows.append({"model": "LM", "scheme": "rope", "method": sc, "coordinates": moved,
                             "at": f"{n} (trained {lengths(t)[0]})", "score": f"bpb {estimate(p, n)}"})
    if not rows:
        s.lines = missing("resolution")
        return s
    s.lines = ["Both experiments side by side: the longest length / highest resolution, without fine-tune.", "",
               md(pd.DataFrame(rows)), ""]
    shows = []
    if r is not None and len(r):
        far = pixels(r)[-1]
        moved, raw = (estimate(select(r, pe="rope2d_mixed", method=m, finetune_steps=0), far)
                      for m in ("interpolate", "extrapolate"))
        if moved.n and raw.n:
            shows.append(f"at {far} the ViT's RoPE-Mixed scores {moved} with its coordinates moved onto the trained "
                         f"range against {raw} with raw ones ({'moving helps' if moved.mean > raw.mean else 'moving does not help'})")
    if t is not None:
        n = lengths(t)[-1]
        raw = estimate(t, n, pe="rope", scale="none", metric="bpb")
        moved = {sc: estimate(t, n, pe="rope", scale=sc, metric="bpb") for sc in ("pi", "ntk", "yarn")}
        best = min((sc for sc in moved if moved[sc].n), key=lambda sc: moved[sc].mean, default=None)
        if best and raw.n:
            shows.append(f"at {n} bytes the LM's RoPE scores {moved[best]} bits per byte with {best} (the best "
                         f"rescaling) against {raw} raw ({'moving helps' if moved[best].mean < raw.mean else 'moving does not help'})")
    if shows:
        s.lines.append("**Shows:** " + "; ".join(shows) + ". The same operation — map the new positions into the range "
                       "the model was trained on — is what both columns vary; C7 and C11 give the full tables.")
    return s


CLAIMS: tuple[Callable[[Tables], Section], ...] = (c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12)
