"""Sweep overrides read with Hydra's public override parser, into the jobs Hydra's basic sweeper runs.

Every sweep syntax Hydra documents for the basic sweeper works: comma lists (``pe=rope,nope``),
``glob(...)`` over a config group's options (``pe=glob(rope*)``, here and in the researcher's
config folders), ``range(...)``, ``choice(...)``, ``shuffle(...)``, quoted values, ``+key=``,
``++key=`` and ``~key``. The jobs come in the basic sweeper's order, the cartesian product of
the sweeps in the order their keys first appear (a key given twice keeps its first place and
its last value), so that job ``i`` here is Hydra's job folder ``i``.

A ``glob`` over a config group means the matching options *that fit the job*: ``pe=glob(rope*)``
on the causal LM runs ``rope`` and leaves out ``rope2d_axial``/``rope2d_mixed`` (ViT schemes),
saying so (``posenc.launch.sweep.plan``); a comma list names its options on purpose, so one that
does not fit stops the sweep.

A sweep is launched with ``explicit`` overrides: each sweep written out as the comma list of
its values, so that the jobs Hydra runs are the jobs checked here, whatever a ``glob`` sees or a
``shuffle`` draws.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from posenc.core.errors import ConfigError


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(job overrides, Hydra overrides such as ``hydra.launcher.partition=gpu``)."""
    hydra = [o for o in overrides if o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    return [o for o in overrides if o not in hydra], hydra


class _Options:
    """The part of Hydra's config loader a ``glob`` asks: a group's options, the researcher's
    config folders included (Hydra's own loader sees them only through ``hydra.searchpath``)."""

    def __init__(self, loader: Any, searchpath: list[str]) -> None:
        self.loader, self.searchpath = loader, searchpath

    def get_group_options(self, group: str, results_filter: Any = None, **_: Any) -> list[str]:
        from hydra.core.object_type import ObjectType

        return self.loader.get_group_options(
            group, results_filter or ObjectType.CONFIG, config_name="config", overrides=self.searchpath
        )


@contextmanager
def _parser() -> Iterator[Any]:
    """Hydra's override parser with a config loader of posenc's tree (and the user's folders)."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from posenc.engine.config import CONFIG_MODULE, searchpath_overrides

    searchpath = searchpath_overrides()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            loader = _Options(GlobalHydra.instance().config_loader(), searchpath)
            yield OverridesParser.create(config_loader=loader)
    finally:
        GlobalHydra.instance().clear()


def _sweeps(overrides: Sequence[str]) -> dict[str, list[str]]:
    """{key element: every ``key=value`` it takes}, in the basic sweeper's order."""
    return sweeps(overrides)[0]


def sweeps(overrides: Sequence[str]) -> tuple[dict[str, list[str]], set[str]]:
    """({key element: every ``key=value`` it takes} in the basic sweeper's order, the keys whose
    values a ``glob`` chose)."""
    from hydra.core.override_parser.types import ValueType

    chosen: dict[str, list[str]] = {}
    globbed: set[str] = set()
    try:
        with _parser() as parser:
            for o in parser.parse_overrides(list(overrides)):
                key = o.get_key_element()
                if not o.is_sweep_override():
                    chosen[key] = [f"{key}={o.get_value_element_as_str()}"]
                    continue
                if not o.is_discrete_sweep():
                    kind = o.value_type.name.lower().removesuffix("_sweep")
                    raise ConfigError(
                        f"'{key}': {kind} sweeps need a sweeper that samples "
                        "(Hydra's basic sweeper takes comma lists, glob, range, choice)"
                    )
                values = list(o.sweep_string_iterator())
                if not values:
                    options = parser.config_loader.get_group_options(o.key_or_group)
                    raise ConfigError(
                        f"'{o.input_line}' matches no {o.key_or_group} option; valid: {', '.join(options)}"
                        if o.is_choice_sweep() and options
                        else f"'{o.input_line}' gives no value"
                    )
                chosen[key] = [f"{key}={v}" for v in values]
                if o.value_type == ValueType.GLOB_CHOICE_SWEEP:
                    globbed.add(key)
                else:
                    globbed.discard(key)
    except ConfigError:
        raise
    except Exception as e:  # Hydra's parser raises several types; all mean a bad override
        raise ConfigError(f"cannot parse sweep override: {str(e).strip().splitlines()[0]}") from None
    return chosen, globbed


def product(chosen: dict[str, list[str]]) -> list[list[str]]:
    """The jobs of ``chosen`` sweeps, in the basic sweeper's order."""
    return [list(job) for job in itertools.product(*chosen.values())]


def written_out(chosen: dict[str, list[str]]) -> list[str]:
    """Each sweep of ``chosen`` as the comma list of its values (``explicit``)."""
    return [
        values[0] if len(values) == 1 else f"{key}={','.join(v.split('=', 1)[1] for v in values)}"
        for key, values in chosen.items()
    ]


def expand(overrides: Sequence[str]) -> list[list[str]]:
    """Every job's overrides, in the order Hydra's basic sweeper numbers the jobs."""
    return product(_sweeps(overrides))


def explicit(overrides: Sequence[str]) -> list[str]:
    """The overrides with each sweep written out as the comma list of its values: Hydra's basic
    sweeper runs from them exactly the jobs ``expand`` gives."""
    return written_out(_sweeps(overrides))
