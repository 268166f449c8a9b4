"""Compose the Hydra config tree and build objects from it with their types checked.

``configs/`` is a Python package, so ``initialize_config_module("configs")`` finds the tree both
in an editable install and in a wheel. ``_target_`` in each option is the only registry: listing
options reads the tree, building objects reads ``_target_``.

A researcher's own options live in their own folder, laid out like the tree (``DIR/pe/mine.yaml``),
named by ``$POSENC_CONFIG_DIR`` (``--config-dir`` sets it; several folders joined by ``os.pathsep``).
Its options are listed and composed with the built-in ones (Hydra's search path), and the folder
is put on ``sys.path``, so a ``_target_`` may name a module that sits in it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import importlib.resources
import inspect
import logging
import os
import sys
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from posenc.core.errors import ConfigError

CONFIG_MODULE = "posenc.configs"
CONFIG_DIR_ENV = "POSENC_CONFIG_DIR"
GROUPS = ("model", "pe", "task", "train", "eval", "scale", "remap", "logger", "experiment")
_RESERVED = ("_target_", "description")


def _div(a: int, b: int) -> int:
    if a % b:
        raise ConfigError(f"{a} is not divisible by {b}")
    return a // b


def _not(value: bool) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"${{not:...}} takes true or false, got {value!r}")
    return not value


if not OmegaConf.has_resolver("div"):
    OmegaConf.register_new_resolver("div", _div)
if not OmegaConf.has_resolver("not"):
    OmegaConf.register_new_resolver("not", _not)


def config_root():
    """The ``configs`` package as an importlib Traversable."""
    return importlib.resources.files(CONFIG_MODULE)


def user_config_dirs() -> list[Path]:
    """The researcher's config folders named by ``$POSENC_CONFIG_DIR``, each put on ``sys.path``
    so that its modules import (a folder that does not exist is a ``ConfigError``)."""
    dirs = [Path(p).expanduser().resolve() for p in os.environ.get(CONFIG_DIR_ENV, "").split(os.pathsep) if p]
    for d in dirs:
        if not d.is_dir():
            raise ConfigError(f"config folder '{d}' (--config-dir, ${CONFIG_DIR_ENV}) is not a folder")
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    return dirs


def searchpath_overrides() -> list[str]:
    """The Hydra override that adds the researcher's config folders to the search path."""
    dirs = user_config_dirs()
    return [f"hydra.searchpath=[{','.join(repr(f'file://{d}') for d in dirs)}]"] if dirs else []


def _option_files(group: str) -> dict[str, Any]:
    """Every option file of a group by name: the built-in tree's, then each user folder's. A user
    option may not take a built-in name (Hydra would silently keep one of the two)."""
    folder = config_root() / group
    if not folder.is_dir():
        raise ConfigError(f"unknown config group '{group}'; valid groups: {', '.join(GROUPS)}")
    files = {e.name[: -len(".yaml")]: e for e in folder.iterdir() if e.name.endswith(".yaml")}
    for d in user_config_dirs():
        for entry in sorted((d / group).glob("*.yaml")):
            if entry.stem in files:
                raise ConfigError(f"{entry}: option '{entry.stem}' already exists in {group}; give yours another name")
            files[entry.stem] = entry
    return dict(sorted(files.items()))


def list_options(group: str) -> dict[str, str]:
    """Every option of a config group with its one-line description, read from the tree (and the
    researcher's config folders)."""
    options = {}
    for name, entry in _option_files(group).items():
        node = _parsed(entry.read_text()) or {}
        options[name] = str(node.get("description", ""))
    return options


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Any:
    """An option file's YAML, parsed once per text (a plan lists and reads options thousands of
    times; keyed by the text itself, so an edited file is parsed again). Callers must not mutate
    it: ``option_node`` hands out copies."""
    return yaml.safe_load(text)


def target_class(node: Any, path: str) -> Any:
    """The class (or function) a config node names with ``_target_``, imported but not built.

    The one way to read an option's ``_target_``: facts about a scheme, scaling, task or model
    live on its class, and callers ask the class.
    """
    from hydra.utils import get_object

    target = (to_container(node) if not isinstance(node, dict) else node).get("_target_")
    if target is None:
        raise ConfigError(f"{path}: no _target_ in the config")
    user_config_dirs()  # a researcher's module in their config folder imports
    try:
        with _quiet_logger("hydra.utils"):  # get_object logs the error it raises; the ConfigError says it
            return get_object(target)
    except Exception as e:  # ImportError, AttributeError, or the module's own error
        reason = (str(e.__cause__ or e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(f"{path}._target_: cannot import '{target}' ({reason})") from None


@contextlib.contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    """Silence the logger ``name`` (and its handlers' output) for the duration."""
    logger = logging.getLogger(name)
    saved, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = saved


def option_file(group: str, option: str) -> Any:
    """The file of ``configs/<group>/<option>.yaml``, or of the researcher's own option."""
    files = _option_files(group)
    if option not in files:
        raise ConfigError(f"unknown {group} '{option}'; valid: {', '.join(files)}")
    return files[option]


def option_node(group: str, option: str) -> dict[str, Any]:
    """The raw YAML of ``configs/<group>/<option>.yaml`` (before composition)."""
    return copy.deepcopy(_parsed(option_file(group, option).read_text())) or {}


def option_class(group: str, option: str) -> Any:
    """The class an option of a group names with ``_target_`` (``option_class("pe", "rope")``)."""
    return target_class(option_node(group, option), f"{group}/{option}")


def options_where(group: str, predicate: Callable[[Any], bool]) -> list[str]:
    """The options of a group whose ``_target_`` class satisfies ``predicate`` (a new option
    shows up wherever its class qualifies, with no list to edit)."""
    return [name for name in list_options(group) if predicate(option_class(group, name))]


def _check_choices(overrides: Sequence[str]) -> None:
    """Name the valid options when a group override names one that does not exist."""
    from hydra.core.override_parser.types import ValueType

    parsed = [_parsed_override(o) for o in overrides]  # a malformed override first, wherever it is
    for o in parsed:
        group = o.key_or_group
        if group in GROUPS and o.package is None and not o.is_delete():
            valid = list_options(group)
            if o.value_type in (ValueType.GLOB_CHOICE_SWEEP, ValueType.INTERVAL_SWEEP):
                continue  # a glob is a sweep's (posenc.launch.overrides); Hydra refuses it in one run
            if o.is_sweep_override():
                values = list(o.sweep_string_iterator())
            else:  # a list picks several options at once (logger=[csv,tensorboard])
                values = o.value() if isinstance(o.value(), list) else [o.value()]
            for value in values:
                if value is not None and str(value) not in valid:
                    raise ConfigError(f"unknown {group} '{value}'; valid: {', '.join(valid)}")


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose ``configs/config.yaml`` with Hydra overrides (``pe=rope``, ``train.lr=1e-3``).

    The result has a ``choices`` node naming the option picked in every group, and no
    ``hydra`` node. It is made as Hydra makes it, in two steps: the overrides that shape the
    defaults list (groups, packages, ``hydra.*``) compose a config, and the ones that set values
    (``train.lr=1e-3``, ``+a.b=1``, ``~a.b``: ``_split``) are then applied to it by Hydra's own
    code. A composition that succeeded before over the same YAML files and shaping overrides is
    not composed again (``posenc.engine.compose_cache``), so jobs that differ only in values
    (a sweep of learning rates or sizes) share one.
    """
    from posenc.engine.compose_cache import remembered

    roots = [config_root(), *user_config_dirs()]
    searchpath = searchpath_overrides()
    shape, values = _split(overrides, roots)
    # the same tree and overrides compose to the same config (posenc.engine.compose_cache)
    cfg = remembered(roots, [*shape, *searchpath], lambda: _hydra_composed([*shape, *searchpath]))
    _apply_values(values, cfg)
    return cfg


def _hydra_composed(overrides: Sequence[str]) -> DictConfig:
    """Hydra's composition of ``config`` with every override, with ``choices`` and no ``hydra``
    node (``with_choices``); Hydra's errors become ``ConfigError``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    _check_choices(overrides)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            cfg = hydra_compose("config", overrides=list(overrides), return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(_hydra_message(e)) from None
    finally:
        GlobalHydra.instance().clear()
    return with_choices(cfg, cfg.hydra.runtime.choices)


def _split(overrides: Sequence[str], roots: Sequence[Any]) -> tuple[list[str], list[Any]]:
    """The overrides that shape a composition (kept as written) and the parsed ones that only set,
    add or delete a value, which Hydra applies after composing (its "config overrides"): a key
    that names no config folder (``seed``, ``train.lr``), outside ``hydra``, ``choices`` and
    ``defaults``, with no package and no sweep. Anything else stays with Hydra, which is always
    right."""
    shape: list[str] = []
    values: list[Any] = []
    for text in overrides:
        key = text.lstrip("+~").split("=", 1)[0]
        parsed = None
        if key.split(".", 1)[0] not in _SHAPING and not set("@/$,[{") & set(key):
            if not any((root / key).is_dir() for root in roots):
                parsed = _parsed_override(text)
        if parsed is None or parsed.package is not None or parsed.is_sweep_override():
            shape.append(text)
        else:
            values.append(parsed)
    return shape, values


_SHAPING = ("hydra", "choices", "defaults")  # top-level keys whose overrides Hydra alone applies


@functools.lru_cache(maxsize=4096)
def _parsed_override(text: str) -> Any:
    """One override as Hydra's parser reads it (read once per text; Hydra only reads it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides([text])[0]  # its messages name the override
    except Exception as e:  # Hydra's parser raises several types; all mean a malformed override
        raise ConfigError(f"cannot parse override: {str(e).splitlines()[0]}") from None


def _apply_values(values: Sequence[Any], cfg: DictConfig) -> None:
    """Apply value overrides to a composed config as Hydra applies them to its own."""
    if not values:
        return
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        ConfigLoaderImpl._apply_overrides_to_config(list(values), cfg)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(_hydra_message(e, cfg)) from None


def with_choices(cfg: DictConfig, choices: Any) -> DictConfig:
    """``cfg`` without a ``hydra`` node and with a ``choices`` node naming the option picked in
    every group: what ``compose`` returns, made from the config Hydra hands a ``@hydra.main`` job
    (with ``HydraConfig.get().runtime.choices``)."""
    picked = {g: choices.get(g) for g in GROUPS}
    with _unlocked(cfg):
        if "hydra" in cfg:
            del cfg["hydra"]
        cfg.choices = picked
    return cfg


def _hydra_message(e: Exception, cfg: DictConfig | None = None) -> str:
    """Hydra's error as one line; an unknown key names the valid keys of its node in ``cfg``, the
    config the override was applied to (None: the default config's)."""
    text = f"{e}\n{e.__cause__ or ''}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].startswith("Could not override '") and "not in struct" in text:
        key = lines[0].split("'")[1]
        group, _, _ = key.partition(".")
        return f"unknown override key '{key}'" + _valid_keys_hint(group, cfg)
    return lines[0] if lines else type(e).__name__


def _valid_keys_hint(group: str, cfg: DictConfig | None = None) -> str:
    """The keys of ``group``'s node in ``cfg`` (the option picked there, not the default's)."""
    try:
        node = (compose_defaults() if cfg is None else cfg).get(group)
    except Exception:
        return ""
    if isinstance(node, DictConfig):
        keys = [k for k in node.keys() if k not in _RESERVED]
        return f"; valid keys in {group}: {', '.join(keys)}"
    return ""


@functools.lru_cache(maxsize=1)
def compose_defaults() -> DictConfig:
    return compose([])


class _unlocked:
    def __init__(self, cfg: DictConfig):
        self.cfg = cfg

    def __enter__(self):
        OmegaConf.set_struct(self.cfg, False)
        OmegaConf.set_readonly(self.cfg, False)

    def __exit__(self, *exc):
        OmegaConf.set_struct(self.cfg, True)


def to_container(node: Any) -> Any:
    """A plain, resolved Python value from an OmegaConf node; errors become ConfigError."""
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(node, (DictConfig, ListConfig)):
        try:
            return OmegaConf.to_container(node, resolve=True)
        except (OmegaConfBaseException, ConfigError) as e:
            message = str(e).splitlines()[0].split("resolving interpolation: ")[-1]
            key = getattr(e, "full_key", None)
            raise ConfigError(f"{key}: {message}" if key else message) from None
    return node


def instantiate(node: Any, path: str, **extra: Any) -> Any:
    """Build the object an option names with ``_target_``, checking every value's type first.

    ``path`` is where the node sits in the config (``pe``), so errors read ``pe.base: …``.
    Keyword arguments in ``extra`` are what the caller injects (the position scheme into a
    model); they are checked like the rest.
    """
    values = dict(to_container(node))
    fn = target_class(values, path)
    values.pop("_target_")
    values.pop("description", None)
    kwargs = check_arguments(fn, {**values, **extra}, path)
    return fn(**kwargs)


def experiment_settings(cfg: DictConfig, key: str, cls: type) -> Any:
    """The ``key`` node that ``experiment=key`` adds (``resolution:``, ``order:``) as the
    dataclass ``cls``, every value checked against its type hints."""
    node = cfg.get(key)
    if node is None:
        raise ConfigError(f"no {key} settings: compose with experiment={key}")
    return cls(**check_arguments(cls, to_container(node), key))


def check_arguments(fn: Any, values: dict[str, Any], path: str) -> dict[str, Any]:
    """Check ``values`` against ``fn``'s signature and type hints; return them coerced."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn if dataclasses.is_dataclass(fn) else (fn.__init__ if inspect.isclass(fn) else fn))
    params = {n: p for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    out = {}
    for key, value in values.items():
        if key not in params:
            raise ConfigError(f"unknown key '{path}.{key}'; valid keys: {', '.join(params)}")
        out[key] = _coerce(value, hints.get(key, Any), f"{path}.{key}")
    missing = [n for n, p in params.items() if p.default is p.empty and n not in out]
    if missing:
        raise ConfigError(f"{path}: missing value for {', '.join(missing)}")
    return out


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any or hint is inspect.Parameter.empty:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as e:
                errors.append(e)
        raise errors[0] if len(errors) == 1 else ConfigError(f"{where}: {value!r} is not a {_name(hint)}")
    if origin is typing.Literal:
        if value in args:
            return value
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
    if origin in (list, tuple, Sequence):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        inner = args[0] if args else Any
        items = [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif inspect.isclass(hint):
        if isinstance(value, hint):
            return value
    else:
        return value
    raise ConfigError(f"{where}: expected {_name(hint)}, got {value!r}")


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
