"""results/REPORT.md: the reference suite's tables read claim by claim (C1–C12 of the seed
document) and beside the published findings they mirror.

Input: the long tables ``posenc.suite.collect`` makes (one row per table row of every job, with
its ``seed``): ``extrapolation_text``, ``extrapolation_passkey``, ``resolution``,
``resolution_similarity``, ``order``, ``check``. Every number is a mean over seeds with its 95%
Student-t interval (``posenc.stats``); a verdict is computed from the intervals, never written
in advance: "holds" needs the interval to clear the threshold, overlap means "not separated".
A table that is missing (a sweep not run) makes its sections say so instead of failing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from posenc.results import atomic_write_text, replace_folder, write_png, write_table
from posenc.stats import summarize

TOL = 1e-5  # experiments.order.INVARIANCE_TOL: float32 sums in another order


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


def _ext(tables: Tables, name: str = "extrapolation_text") -> pd.DataFrame | None:
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
    t = _ext(tables)
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
        cols, train_px = pixels(r), _train_px(r)
        parts = []
        for pe in ("learned", "learned2d"):
            for method in ("bilinear", "bicubic"):
                p = select(r, pe=pe, method=method, finetune_steps=0)
                if len(p):
                    parts.append(f"{pe}/{method}: " + ", ".join(f"{c} {estimate(p, c)}" for c in cols))
        lines.append(f"Images (`suite/resolution.csv`): a table trained on the {train_px} grid must be resampled to "
                     "be used on another; accuracy without fine-tune — " + "; ".join(parts) + ".")
    s.lines = lines or missing("extrapolation_text")
    return s


def c5(tables: Tables) -> Section:
    s = Section("C5", "a formula defined at every position does not make the model generalize there",
                "Sinusoidal tables and RoPE are defined at any position, yet a model trained at length L has never seen the longer ones.")
    t = _ext(tables)
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
    t = _ext(tables)
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
    t = _ext(tables)
    if t is None:
        s.lines = missing("extrapolation_text")
        return s
    rope = t[(t["pe"] == "rope") & t["scale"].isin(SCALES)]
    ns = lengths(t)
    s.lines = ["Test: the RoPE model of C5 scored with each rescaling, factor = evaluated length / training length "
               "(no fine-tune); bits per byte:", "", md(extrapolation_table(rope, "bpb")), ""]
    p = _ext(tables, "extrapolation_passkey")
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
    t = _ext(tables)
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

def _train_px(r: pd.DataFrame) -> str:
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
    s.lines = [f"Test: `posenc resolution` — the ViT trained at {_train_px(r)} on shapes labelled by quadrant, accuracy at "
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
    t, r = _ext(tables), completed(tables.get("resolution"))
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
                                 "at": f"{far} (trained {_train_px(r)})", "score": f"accuracy {estimate(p, far)}"})
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


# --- the published findings ------------------------------------------------------------------------

def vit_ablation(tables: Tables) -> Section:
    s = Section("ViT", "Dosovitskiy et al. 2021, position-embedding ablation",
                "Published: no position embedding is clearly worse; 1D, 2D and relative embeddings are about equal.")
    r = completed(tables.get("resolution"))
    if r is None or not len(r):
        s.lines = missing("resolution")
        return s
    px = _train_px(r)
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
    t = _ext(tables)
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
            + (", ".join(separated) + " (intervals separated)" if separated else "no rival with separated intervals")
            + (f", and less than {', '.join(by_mean)} by the mean only" if by_mean else "") + "."
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
    t = _ext(tables)
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
            at_l = estimate(tt, lengths(tt)[0], scale="pi", finetune_steps=0, metric="bpb")
            raw, tuned = (_span_estimate(tt, within, scale="pi", finetune_steps=ft) for ft in (0, steps))
            s.lines.append(f"With a fixed factor {factor} and {steps} fine-tune steps at each length, PI over "
                           f"{within[0]}–{within[-1]} bytes: {raw} before, {tuned} after fine-tuning (at the training "
                           f"length: {at_l}).")
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
    overlap = lambda x, y: not (x.below(y.low) or y.below(x.low))  # noqa: E731 - a two-line relation
    within_ok = w["pi"].mean < w["ntk"].mean and w["yarn"].mean < w["ntk"].mean and overlap(w["pi"], w["yarn"])
    beyond_ok = (b["yarn"].mean <= b["ntk"].mean or overlap(b["yarn"], b["ntk"])) and b["ntk"].below(b["pi"].low)
    s.lines = [f"Ours: RoPE trained at {lengths(t)[0]} bytes, every rescaling at a fixed factor {factor} (target "
               f"{int(lengths(t)[0]) * factor}), bits per byte averaged over the lengths within and beyond the target "
               "(`suite/extrapolation_target.csv`):", "", md(pd.DataFrame(rows)), "",
               f"Within the target after {ft} fine-tune steps: {' < '.join(sorted(w, key=lambda k: w[k].mean))}; beyond it "
               f"without fine-tune: {' < '.join(sorted(b, key=lambda k: b[k].mean))}.",
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
    px, cols = _train_px(r), pixels(r)
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
    t, p = _ext(tables), _ext(tables, "extrapolation_passkey")
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


CLAIMS: tuple[Callable[[Tables], Section], ...] = (c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12)
FINDINGS: tuple[Callable[[Tables], Section], ...] = (vit_ablation, alibi, pi, yarn, rope_vit, nope)


# --- plots ---------------------------------------------------------------------------------------

def plot_extrapolation(t: pd.DataFrame, metric: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = lengths(t)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    cells = list(dict.fromkeys(zip(t["pe"], t["scale"])))
    palette = plt.get_cmap("tab10" if len(cells) <= 10 else "tab20")
    for i, (pe, scale) in enumerate(cells):
        part = select(t, pe=pe, scale=scale, metric=metric)
        est = [estimate(part, n) for n in ns]
        xs = [int(n) for n, e in zip(ns, est) if e.n]
        if not xs:
            continue
        es = [e for e in est if e.n]
        colour = palette(i % palette.N)
        ax.plot(xs, [e.mean for e in es], marker="o", color=colour, label=f"{pe}/{scale}",
                linestyle="-" if scale == "none" else "--")
        if all(not math.isnan(e.low) for e in es):
            ax.fill_between(xs, [e.low for e in es], [e.high for e in es], color=colour, alpha=0.15)
    ax.axvline(int(ns[0]), color="grey", linestyle=":", label="train length")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("evaluated length (tokens)")
    ax.set_ylabel({"bpb": "bits per byte", "accuracy": "answer accuracy"}.get(metric, metric))
    ax.set_title("mean over seeds, band: 95% interval", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    write_png(fig, path)


def plot_resolution(r: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols, steps = pixels(r), sorted(int(x) for x in r["finetune_steps"].dropna().unique())
    xs = [int(c[:-2]) for c in cols]
    fig, axes = plt.subplots(1, len(steps), figsize=(6.5 * len(steps), 4.5), sharey=True, squeeze=False)
    colours = {pe: plt.get_cmap("tab10")(i % 10) for i, pe in enumerate(r["pe"].unique())}
    for ax, ft in zip(axes[0], steps):
        for (pe, method), part in r[r["finetune_steps"] == ft].groupby(["pe", "method"], sort=False):
            est = [estimate(part, c) for c in cols]
            ax.plot(xs, [e.mean for e in est], marker="o", color=colours[pe], label=f"{pe} / {method}",
                    linestyle="--" if method in ("extrapolate", "clip") else "-")
            if all(not math.isnan(e.low) for e in est):
                ax.fill_between(xs, [e.low for e in est], [e.high for e in est], color=colours[pe], alpha=0.1)
        ax.set_title("no fine-tune" if ft == 0 else f"after {ft} fine-tune steps", fontsize=10)
        ax.set_xlabel("evaluation resolution (px)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy (mean over seeds, band: 95% interval)")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    write_png(fig, path)


def plot_order(t: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(t.groupby(["model", "attention", "pe"], sort=False))
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.2 * len(groups)), 4.5))
    for i, phase in enumerate(("init", "trained")):
        xs = [j + (i - 0.5) * 0.4 for j in range(len(groups))]
        res = [float(g[g["phase"] == phase]["equivariance_residual"].max()) for _, g in groups]
        acc = [estimate(g, "accuracy", phase=phase) for _, g in groups]
        axes[0].bar(xs, [max(v, 1e-12) for v in res], 0.4, label=phase)
        axes[1].bar(xs, [e.mean for e in acc], 0.4, label=phase,
                    yerr=[[e.mean - e.low if not math.isnan(e.low) else 0 for e in acc],
                          [e.high - e.mean if not math.isnan(e.high) else 0 for e in acc]])
    axes[0].set_yscale("log")
    axes[0].axhline(TOL, color="k", ls="--", lw=1, label=f"tolerance {TOL:g}")
    axes[0].set_title("permutation residual (max over seeds)", fontsize=9)
    axes[1].axhline(float(t["chance_95"].max()), color="grey", ls=":", lw=1, label="chance, 95% bound")
    axes[1].set_title("order-task accuracy (mean, 95% interval)", fontsize=9)
    labels = [f"{pe}\n{att}\n{model}" for (model, att, pe), _ in groups]
    for ax in axes:
        ax.set_xticks(range(len(groups)), labels, fontsize=7)
        ax.legend(fontsize=7)
    fig.tight_layout()
    write_png(fig, path)


# --- the report ----------------------------------------------------------------------------------

def _meta_lines(meta: dict[str, Any]) -> list[str]:
    m = meta.get("machine", {})
    seconds = meta.get("seconds")
    took = f"{seconds / 60:.1f} min" if isinstance(seconds, (int, float)) else "unknown time"
    lines = [f"Suite `{meta.get('suite', '?')}` ({meta.get('description', '')}), seeds {meta.get('seeds')}, launcher "
             f"`{meta.get('launcher')}`: {took} on {m.get('cpus', '?')} CPU cores ({m.get('machine', '?')}"
             f"{', ' + m['cuda'] if m.get('cuda') else ''}), torch {m.get('torch', '?')}, Python {m.get('python', '?')}; "
             f"created {meta.get('created', '?')}.", ""]
    sweeps = meta.get("sweeps", {})
    if sweeps:
        rows = [{"sweep": k, "jobs": v.get("jobs"), "minutes": f"{v['seconds'] / 60:.1f}" if v.get("seconds") else "—",
                 "what": v.get("description", "")} for k, v in sweeps.items()]
        lines += [md(pd.DataFrame(rows)), ""]
    return lines


def render(tables: Tables, meta: dict[str, Any]) -> str:
    """The report's Markdown (plots are referenced as ``suite/*.png``)."""
    lines = ["# posenc reference report", "",
             "Generated by `posenc suite` from the tables in `suite/`; every number is the mean over seeds with its "
             "95% Student-t interval in brackets (one seed: the value alone). Verdicts are computed from the intervals.",
             "", *_meta_lines(meta), "## The seed document's claims", ""]
    lines += [f(tables).text() for f in CLAIMS]
    lines += ["## Beside the published findings", ""]
    lines += [f(tables).text() for f in FINDINGS]
    return "\n".join(lines)


def write_report(tables: Tables, meta: dict[str, Any], out: Path) -> Path:
    """``out/REPORT.md`` and ``out/suite/`` (every table as CSV and Markdown, the plots); the
    folder is replaced whole, so a crash leaves the previous report's tables or the new ones."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def fill(folder: Path) -> None:
        for name, table in tables.items():
            write_table(table, folder, name)
        for name in ("extrapolation_text", "extrapolation_passkey"):
            t = _ext(tables, name)
            if t is not None:
                plot_extrapolation(t, "bpb" if name.endswith("text") else "accuracy", folder / f"{name}.png")
        r = completed(tables.get("resolution"))
        if r is not None and len(r):
            plot_resolution(r, folder / "resolution.png")
        o = order_rows(tables)
        if o is not None:
            plot_order(o, folder / "order.png")
        write_table(pd.DataFrame([{"key": k, "value": str(v)} for k, v in meta.items() if k != "sweeps"]), folder, "suite")

    replace_folder(out / "suite", fill)
    report = out / "REPORT.md"
    atomic_write_text(report, render(tables, meta) + f"\n\n---\nWritten {time.strftime('%Y-%m-%d %H:%M:%S')}.\n")
    return report

