"""Which (scheme, scale) cells a request means: every scale option that applies to a scheme,
read from the scale classes (``applies``, ``requires``), never from a list of names."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from posenc.core.errors import ConfigError
from posenc.engine.config import compose, instantiate, list_options, option_node, target_class
from posenc.pe.scaling import NoScale


def scale_options() -> dict[str, dict[str, Any]]:
    """Every option of ``configs/scale/`` as its raw YAML node, ``none`` first."""
    names = sorted(list_options("scale"), key=lambda n: (n != "none", n))
    return {name: option_node("scale", name) for name in names}


def scale_class(node: dict[str, Any]) -> type[NoScale]:
    """The class a scale option's YAML names: what it acts on and which parameters it requires."""
    return target_class(node, "scale")


def plan(pes: Sequence[str], scales: Sequence[str], overrides: Sequence[str] = ()) -> list[DictConfig]:
    """One composed config per (pe, scale) pair where the scale applies to the scheme.

    ``scales`` may be ``["all"]``: every scale that applies to each scheme (LongRoPE only when
    its factor lists are given). A ``scale.KEY=…`` override goes to the scales that have KEY.
    Every requested scale must apply to some requested scheme, and every scheme must get a scale.
    The unscaled cell (``none``) is always planned beside them, so every table has its baseline.
    """
    options = scale_options()
    for o in overrides:
        if o.split("=", 1)[0].lstrip("+~") in ("pe", "scale"):
            raise ConfigError(f"override '{o}': give schemes with --pe and scales with --scale")
    if not pes:
        raise ConfigError("no position scheme given; valid: " + ", ".join(list_options("pe")))
    if not scales:
        raise ConfigError("no scale given; valid: all, " + ", ".join(options))
    for name in scales:
        if name != "all" and name not in options:
            raise ConfigError(f"unknown scale '{name}'; valid: all, {', '.join(options)}")
    scale_keys = [o.split("=", 1)[0].removeprefix("scale.") for o in overrides if o.startswith("scale.")]
    requested = list(options) if "all" in scales else list(dict.fromkeys(scales))
    for key in scale_keys:
        if not any(key in options[s] for s in requested):
            raise ConfigError(f"unknown override key 'scale.{key}'; no requested scale has it ({', '.join(requested)})")

    applicable: dict[str, list[str]] = {}
    for pe in dict.fromkeys(pes):
        scheme = instantiate(compose([*overrides_for(overrides, "none", options), f"pe={pe}"]).pe, "pe")
        applicable[pe] = [s for s in options if scale_class(options[s]).applies(scheme)]
    given = set(scale_keys)
    cells = []
    for pe, fits in applicable.items():
        if "all" in scales:
            chosen = [s for s in fits if all(k in given for k in scale_class(options[s]).requires)]
        else:
            chosen = [s for s in requested if s in fits]
            if not chosen:
                raise ConfigError(
                    f"no requested scale applies to pe '{pe}' ({', '.join(requested)}); "
                    f"scales for {pe}: {', '.join(fits)}"
                )
        chosen = with_baseline(chosen)
        cells += [compose([*overrides_for(overrides, s, options), f"pe={pe}", f"scale={s}"]) for s in chosen]
    if "all" not in scales:
        for s in requested:
            if not any(s in fits for fits in applicable.values()):
                acts_on = scale_class(options[s]).acts_on
                which = "; ".join(f"{pe}: {', '.join(fits)}" for pe, fits in applicable.items())
                raise ConfigError(
                    f"scale '{s}' does not apply to pe {', '.join(applicable)}: it rescales "
                    f"{acts_on}; scales that apply: {which}"
                )
    return cells


def with_baseline(scales: Sequence[str]) -> list[str]:
    """``none`` first, then the other scales: the unscaled model is what a rescaling is read against."""
    return ["none", *(s for s in scales if s != "none")]


def overrides_for(overrides: Sequence[str], scale: str, options: dict[str, dict[str, Any]]) -> list[str]:
    """The overrides without the ``scale.KEY=…`` ones that ``scale`` has no KEY for."""
    return [
        o
        for o in overrides
        if not o.startswith("scale.") or o.split("=", 1)[0].removeprefix("scale.") in options[scale]
    ]


def with_scale(cfg: DictConfig, name: str, node: dict[str, Any]) -> DictConfig:
    """A copy of ``cfg`` with the scale option ``name`` (its YAML ``node``) in place of its own."""
    out = copy.deepcopy(cfg)
    with open_dict(out):
        out.scale = OmegaConf.create(node)
        out.choices.scale = name
    return out


def cells_of(cfg: DictConfig, scales: Sequence[str], factor: float | None = None) -> list[DictConfig]:
    """One config per scale of ``scales`` (``all``: every option) that applies to ``cfg``'s scheme;
    ``factor`` fixes ``scale.factor`` of those that have one (target length factor × L; null
    scales to each evaluated length).

    What ``plan`` does for the command line, for a config that is already composed (a sweep job).
    """
    options = scale_options()
    for name in scales:
        if name != "all" and name not in options:
            raise ConfigError(f"unknown scale '{name}' in extrapolation.scales; valid: all, {', '.join(options)}")
    requested = list(options) if "all" in scales else list(dict.fromkeys(scales))
    scheme = instantiate(cfg.pe, "pe")
    # under ``all``, LongRoPE only when its factor lists are given (as in ``plan``)
    fits = [
        s
        for s in requested
        if scale_class(options[s]).applies(scheme) and not ("all" in scales and scale_class(options[s]).requires)
    ]
    if not fits:
        raise ConfigError(f"no scale of extrapolation.scales ({', '.join(requested)}) applies to pe '{cfg.choices.pe}'")
    if factor is not None:
        options = {s: {**node, "factor": factor} if "factor" in node else node for s, node in options.items()}
    return [with_scale(cfg, s, options[s]) for s in with_baseline(fits)]
