"""Protocol ``check`` (properties): the seed's mathematics measured on every scheme in the tree.

Schemes come from the config tree and are picked for a check by what they do, never by name:

* fixed embeddings (``adds_embedding``, no trainable parameter, no table length): C4 shift;
* rotations (``rotates_qk``): C9 relative invariance in float32 and float64 (1D offsets or
  (Δrow, Δcol) for ``ndim`` 2), norm preservation, V untouched; for 1D, C10 decay and
  periodicity;
* biases (``adds_bias``): the bias depends only on the offset.

A scheme is built with the first model option whose config it composes and instantiates with
(a ``ConfigError`` means it does not fit that model). The table has one row per measured number
with its tolerance and pass/fail; a figure per check goes to the run directory (``plots.format``:
png, svg or pdf).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from omegaconf import DictConfig

from posenc.analysis import properties as props
from posenc.core.errors import ConfigError
from posenc.engine.build import trainable_models
from posenc.engine.config import compose, experiment_settings, instantiate, list_options
from posenc.engine.context import Result, RunContext, TableSpec
from posenc.pe.base import PositionScheme
from posenc.reporting.style import figure_format, pyplot, save_figure

SHIFT_DELTAS = [1, 3, 17, 100]
COLUMNS = ["claim", "check", "pe", "seed", "measured", "criterion", "tolerance", "passed", "note"]
TABLES = (
    TableSpec(
        "check",
        keys=("claim", "check", "pe"),
        pairs=("seed",),
        main=True,
        description="one row per measured number: its tolerance and whether it passed",
    ),
)


@dataclass
class Scheme:
    name: str
    model: str
    pe: PositionScheme
    head_dim: int | None
    n_heads: int = 1  # the model's; a scheme with per-head parameters needs that many heads


def head_dim_of(pe: PositionScheme, cfg: DictConfig) -> int | None:
    """The per-head width a rotating scheme acts on: its own ``head_dim``, else d_model / n_heads."""
    if getattr(pe, "head_dim", None):
        return int(pe.head_dim)
    model = cfg.get("model", {})
    if "d_model" in model and "n_heads" in model:
        return int(model.d_model) // int(model.n_heads)
    return None


def plan(
    pes: Sequence[str] | None = None, models: Sequence[str] | None = None, overrides: Sequence[str] = (), seed: int = 0
) -> tuple[list[Scheme], list[dict[str, str]]]:
    """Build every scheme to check; an explicitly named one that builds with no model is an error."""
    valid_pe, valid_model = list_options("pe"), list_options("model")
    for group, names, valid in (("pe", pes, valid_pe), ("model", models, valid_model)):
        for name in names or ():
            if name not in valid:
                raise ConfigError(f"unknown {group} '{name}'; valid: {', '.join(valid)}")
    schemes, skipped = [], []
    for name in pes or list(valid_pe):
        reasons = []
        for model in models or trainable_models():
            try:
                cfg = compose([f"model={model}", f"pe={name}", *overrides])
                torch.manual_seed(seed)
                pe = instantiate(cfg.pe, "pe")
            except ConfigError as e:
                reasons.append(f"{model}: {e}")
                continue
            schemes.append(Scheme(name, model, pe, head_dim_of(pe, cfg), int(cfg.model.get("n_heads", 1) or 1)))
            break
        else:
            if pes:
                raise ConfigError(
                    f"pe '{name}' does not build with model {', '.join(models or trainable_models())} "
                    f"({'; '.join(reasons)})"
                )
            skipped.append({"pe": name, "reason": "; ".join(reasons)})
    return schemes, skipped


def is_fixed_embedding(pe: PositionScheme) -> bool:
    """An embedding that is a fixed function of position (C4 is claimed for those only)."""
    return pe.adds_embedding and pe.max_positions is None and not any(p.requires_grad for p in pe.parameters())


def planned(scheme: Scheme, seed: int = 0) -> list[tuple[str, str, Callable[[], props.Measurement]]]:
    """(claim, check id, measure) for every check that applies to one scheme, by its capabilities
    (the check id, ``Measurement.kind``, names the check's figure: ``c9_relative.png``)."""
    pe, h, heads = scheme.pe, scheme.head_dim, scheme.n_heads
    calls: list[tuple[str, str, Callable[[], props.Measurement]]] = []
    if is_fixed_embedding(pe):
        calls.append(("C4", "c4_shift", lambda: props.shift_fit(pe, SHIFT_DELTAS)))
    if pe.rotates_qk:
        if h is None:
            raise ConfigError(f"pe '{scheme.name}': cannot tell its head dimension (no head_dim, no model.d_model)")
        top = 1024 if pe.ndim == 1 else 64
        for dtype in (torch.float32, torch.float64):
            calls.append(
                (
                    "C9",
                    "c9_relative",
                    lambda dtype=dtype: props.relative_invariance(pe, h, dtype, n_heads=heads, top=top, seed=seed),
                )
            )
        for dtype in (torch.float32, torch.float64):
            calls.append(
                (
                    "C9",
                    "c9_norm",
                    lambda dtype=dtype: props.norm_preservation(pe, h, dtype, n_heads=heads, top=top, seed=seed + 1),
                )
            )
        calls.append(("C9", "c9_values", lambda: props.values_untouched(pe, h, n_heads=heads, seed=seed + 2)))
        if pe.ndim == 1:
            calls.append(("C10", "c10_decay", lambda: props.long_term_decay(pe, h, n_heads=heads)))
            calls.append(("C10", "c10_periodicity", lambda: props.periodicity(pe, h, n_heads=heads)))
    if pe.adds_bias:
        calls.append(("C8", "c8_bias", lambda: props.bias_offset_only(pe)))
    return calls


def measurements(scheme: Scheme, seed: int = 0) -> list[props.Measurement]:
    """Every check that applies to one scheme; one that cannot run on it fails with the reason."""
    out = []
    for claim, check_id, measure in planned(scheme, seed):
        try:
            out.append(measure())
        except Exception as e:  # the scheme breaks an assumption of the check: that is a failure too
            out.append(
                props.Measurement(
                    claim,
                    f"{check_id} could not run",
                    float("nan"),
                    float("nan"),
                    note=f"{type(e).__name__}: {e}",
                    kind=check_id,
                )
            )
    return out


def run(
    schemes: list[Scheme],
    skipped: list[dict[str, str]],
    ctx: RunContext,
    *,
    seed: int = 0,
    config: dict | None = None,
    fmt: str = "png",
) -> Result:
    """Measure, write check.csv/.md, one figure per check (in ``fmt``), and the summary (``passed``
    overall)."""
    config = {**(config or {}), "schemes": {s.name: s.model for s in schemes}, "seed": seed, "skipped": skipped}
    with ctx.running("check", config) as run_dir:
        results = []
        ctx.emit("stage", "check", total=len(schemes))
        for i, s in enumerate(schemes):
            results += [(s, m) for m in measurements(s, seed)]
            ctx.emit("advance", "check", done=i + 1, info=s.name)
        table = pd.DataFrame(
            [
                {
                    "claim": m.claim,
                    "check": m.check,
                    "pe": s.name,
                    "seed": seed,
                    "measured": m.measured,
                    "criterion": "≤" if m.at_most else "≥",
                    "tolerance": m.tolerance,
                    "passed": m.passed,
                    "note": m.note,
                }
                for s, m in results
            ],
            columns=COLUMNS,
        )
        result = ctx.write(run_dir, TABLES, {"check": table})
        figures = plot(results, run_dir.path, fmt)
        n_failed = int((~table.passed.astype(bool)).sum())
        capabilities = {
            "fixed embedding (C4)": any(is_fixed_embedding(s.pe) for s in schemes),
            "rotates_qk (C9, C10)": any(s.pe.rotates_qk for s in schemes),
            "rotates_qk, ndim 2 (C9 2D)": any(s.pe.rotates_qk and s.pe.ndim == 2 for s in schemes),
            "adds_bias (C8)": any(s.pe.adds_bias for s in schemes),
        }
        run_dir.update_summary(
            checks=len(table),
            failed=n_failed,
            passed=n_failed == 0,
            figures=figures,
            skipped=skipped,
            not_checked=[k for k, v in capabilities.items() if not v],
        )
    return result


@dataclass
class CheckConfig:
    """The ``check`` node of ``experiment=check``: ``plan``'s names (null: every option) and
    overrides composed into every scheme's config (``pe.base=500000``)."""

    pes: list[str] | None = None
    models: list[str] | None = None
    overrides: list[str] = field(default_factory=list)


class Check:
    """The protocol of ``experiment=check``: every check on every planned scheme at the config's seed."""

    tables = TABLES

    def plan(self, cfg: DictConfig) -> tuple[CheckConfig, list[Scheme], list[dict[str, str]]]:
        """The settings and the built schemes of the config."""
        figure_format(cfg)  # a bad plots.format stops here, before any work
        settings = experiment_settings(cfg, "check", CheckConfig)
        schemes, skipped = plan(settings.pes, settings.models, settings.overrides, int(cfg.seed))
        return settings, schemes, skipped

    def check(self, cfg: DictConfig) -> None:
        """Every name checked and every scheme built, as the run builds them."""
        self.plan(cfg)

    def run(self, cfg: DictConfig, ctx: RunContext) -> Result:
        settings, schemes, skipped = self.plan(cfg)
        config = {"overrides": settings.overrides}
        return run(schemes, skipped, ctx, seed=int(cfg.seed), config=config, fmt=figure_format(cfg))


def plot_format(overrides: Sequence[str]) -> str:
    """The figures' format the overrides of a check run ask for (``plots.format=svg``; png by
    default), composed from the ``plots`` overrides alone: the others are a scheme's own keys."""
    return figure_format(compose([o for o in overrides if o.lstrip("+~").split(".", 1)[0] == "plots"]))


def plot(results: list[tuple[Scheme, props.Measurement]], folder: Path, fmt: str = "png") -> list[str]:
    """One figure per kind of check that ran (``<check id>.<fmt>``); returns their file names."""
    plt = pyplot()

    by_check: dict[str, list[tuple[Scheme, props.Measurement]]] = {}
    for s, m in results:
        if math.isfinite(m.measured):  # a check that could not run has nothing to draw
            by_check.setdefault(m.kind, []).append((s, m))
    written = []
    for check_id, items in by_check.items():
        fig = _FIGURES[check_id](plt, items)
        fig.suptitle(f"{items[0][1].claim}: {_TITLES[check_id]}", fontsize=10)
        fig.tight_layout()
        save_figure(fig, folder / f"{check_id}.{fmt}")
        written.append(f"{check_id}.{fmt}")
    return written


_TITLES = {
    "c4_shift": "sinusoidal shift PE(pos+Δ) = M_Δ·PE(pos)",
    "c9_relative": "⟨R_m q, R_n k⟩ depends only on the offset",
    "c9_norm": "rotation keeps ‖q‖·‖k‖",
    "c9_values": "only Q and K rotate",
    "c8_bias": "bias depends only on i − j",
    "c10_decay": "long-term decay of the relative upper bound (RoFormer §3.4.3)",
    "c10_periodicity": "one frequency returns, all frequencies together do not",
}


def _shift_figure(plt, items):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for s, m in items:
        rows = m.curves["rows"]
        deltas = [r[0] for r in rows]
        axes[0].plot(deltas, [r[1] for r in rows], "o-", label=f"{s.name}: fitted window")
        axes[0].plot(deltas, [r[2] for r in rows], "s--", label=f"{s.name}: far window")
        axes[0].plot(deltas, [r[3] for r in rows], "^:", label=f"{s.name}: ‖M_near − M_far‖/‖M‖")
    axes[0].axhline(items[0][1].tolerance, color="k", lw=1, label="tolerance")
    axes[0].set(xscale="log", yscale="log", xlabel="Δ", ylabel="relative residual")
    axes[0].legend(fontsize=7)
    m = items[0][1]
    im = axes[1].imshow(m.curves["matrix"][:16, :16].abs().numpy(), cmap="viridis")  # 2x2 blocks show
    axes[1].set_title(f"|M_Δ| fitted for {items[0][0].name}, Δ={m.curves['delta']} (first 16 dims)", fontsize=9)
    fig.colorbar(im, ax=axes[1])
    return fig


def _scatter_figure(x_key: str, x_label: str):
    def figure(plt, items):
        fig, ax = plt.subplots(figsize=(7, 4))
        for s, m in items:
            ax.scatter(m.curves[x_key], m.curves["error"].clip(1e-18), s=2, label=f"{s.name} ({m.curves['dtype']})")
        for tol in sorted({m.tolerance for _, m in items}):
            ax.axhline(tol, color="k", lw=1)
        ax.set(yscale="log", xlabel=x_label, ylabel="error / (‖q‖‖k‖)")
        ax.legend(fontsize=7, markerscale=4)
        return fig

    return figure


def _bar_figure(plt, items):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([s.name for s, _ in items], [max(m.measured, 1e-18) for _, m in items])
    ax.axhline(items[0][1].tolerance, color="k", lw=1, label="tolerance")
    ax.set(yscale="log", ylabel="max |difference| / max |output|")
    ax.legend(fontsize=7)
    return fig


def _bias_figure(plt, items):
    fig, axes = plt.subplots(1, len(items), figsize=(3.5 * len(items), 3.5), squeeze=False)
    for ax, (s, m) in zip(axes[0], items):
        im = ax.imshow(m.curves["bias"], cmap="coolwarm")
        ax.set_title(f"{s.name}, head 0 (spread {m.measured:.1e})", fontsize=8)
        fig.colorbar(im, ax=ax)
    return fig


def _decay_figure(plt, items):
    fig, ax = plt.subplots(figsize=(7, 4))
    for s, m in items:
        ax.plot(m.curves["distance"], m.curves["bound"], label=f"{s.name} (ratio {m.measured:.2f})")
    ax.set(xlabel="relative distance Δ", ylabel="(1/(d/2)) Σ_j |S_j|")
    ax.legend(fontsize=7)
    return fig


def _periodicity_figure(plt, items):
    fig, ax = plt.subplots(figsize=(8, 4))
    for s, m in items:
        d = m.curves["distance"]
        ax.plot(d, m.curves["one"], lw=0.6, alpha=0.6, label=f"{s.name}: fastest frequency alone")
        ax.plot(d, m.curves["all"], lw=1, label=f"{s.name}: all frequencies")
    ax.axhline(items[0][1].tolerance, color="k", lw=1, ls="--", label="return threshold ε")
    ax.set(xscale="log", xlabel="Δ", ylabel="r(Δ) = rms |e^{iΔθ} − 1| / 2")
    ax.legend(fontsize=7)
    return fig


_FIGURES = {
    "c4_shift": _shift_figure,
    "c9_relative": _scatter_figure("offset", "offset n − m (|Δrow| + |Δcol| in 2D)"),
    "c9_norm": _scatter_figure("position", "position m"),
    "c9_values": _bar_figure,
    "c8_bias": _bias_figure,
    "c10_decay": _decay_figure,
    "c10_periodicity": _periodicity_figure,
}
