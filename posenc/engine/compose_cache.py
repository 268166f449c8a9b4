"""Composed configs remembered by everything composing reads, so that planning a suite (a few
hundred Hydra compositions of about 0.2 s each) does not compose one twice.

Hydra composes a config from the YAML files of the search path, the overrides and its own code:
the result does not depend on the rest of posenc's Python code, because interpolations
(``${model.n_heads}``, ``${div:…}``) stay unresolved in a composed config until a caller reads
them. So a composition is keyed by a hash of

- the content (not the times) of every ``.yaml`` file in posenc's config tree and in the
  researcher's config folders (``$POSENC_CONFIG_DIR``), but for the suites (``tree_digest``),
- the overrides that shape the composition (``posenc.engine.config.compose`` applies the ones
  that only set values to a copy), the search-path override that names those folders included,
- the versions of hydra-core and omegaconf and the Hydra plugins installed (a plugin may add a
  search path or configs of its own), and the code that calls Hydra (``posenc.engine.config``).

An edit to any YAML file, an upgrade, or a new plugin composes afresh; only compositions that
succeeded are kept, so a mistake is found again every time. A kept config is the ``DictConfig``
itself, pickled (its flags and node types as Hydra made them); each caller gets its own copy.
It is kept for this process and, under ``compose_cache()`` (``$POSENC_COMPOSE_CACHE``, else
``~/.cache/posenc/composed``; ``off`` keeps nothing), for the next one. The cache is the user's
own folder: pickles are read from it as a checkpoint is.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

COMPOSE_CACHE_ENV = "POSENC_COMPOSE_CACHE"
UNCOMPOSED = ("suite",)  # config folders no composition reads unless an override names them
STALE_DAYS = 14  # a tree's folder nobody composed from for this long is removed when another one starts

_memory: dict[str, bytes] = {}
_touched: set[Path] = set()  # the tree folders this process has marked as used


def cache_folder(env: str, name: str) -> Path | None:
    """A folder of posenc's in the user's cache: ``$<env>``, else (``$XDG_CACHE_HOME`` or
    ``~/.cache``)/posenc/<name>; None when ``$<env>`` is ``off``."""
    value = os.environ.get(env)
    if value == "off":
        return None
    if value:
        return Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "posenc" / name


def compose_cache() -> Path | None:
    """Where composed configs are kept between processes (``cache_folder``: $POSENC_COMPOSE_CACHE
    or ~/.cache/posenc/composed); None when ``off``: nothing is kept, not even in memory."""
    return cache_folder(COMPOSE_CACHE_ENV, "composed")


@functools.cache
def _composer_versions() -> str:
    """hydra-core's and omegaconf's versions, the Hydra plugins installed, and a hash of the code
    that composes (``posenc.engine.config``, this module): read once a process."""
    import importlib.metadata
    import pkgutil

    import posenc.engine.config

    code = b"".join(Path(m.__file__).read_bytes() for m in (posenc.engine.config, sys.modules[__name__]))
    versions = [hashlib.blake2b(code, digest_size=8).hexdigest()]
    versions += [f"{p}={importlib.metadata.version(p)}" for p in ("hydra-core", "omegaconf")]
    try:
        import hydra_plugins

        versions += sorted(m.name for m in pkgutil.iter_modules(hydra_plugins.__path__))
    except ImportError:  # no plugin installed: the base install
        pass
    return ";".join(versions)


def _yaml_files(folder: Any, prefix: str = "", skip: Collection[str] = ()) -> Iterable[tuple[str, Any]]:
    """(relative path, entry) of every ``.yaml`` file under a folder (a ``Path`` or an importlib
    ``Traversable``, so that the tree inside a wheel is read the same way), but for the folders
    named in ``skip``."""
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        name = f"{prefix}{entry.name}"
        if entry.is_dir() and name not in skip:
            yield from _yaml_files(entry, f"{name}/")
        elif entry.name.endswith((".yaml", ".yml")):
            yield name, entry


def tree_digest(roots: Sequence[Any], overrides: Sequence[str] = ()) -> str:
    """A hash of the content of every YAML file under ``roots`` (in order) and of the composer's
    versions: what a composition reads besides its overrides.

    ``suite/`` is left out unless an override names it: a suite file is read by ``posenc suite``
    (``posenc.launch.suite.load``), not composed (config.yaml's defaults name no suite), so that
    editing a suite keeps the compositions of its jobs."""
    named = {o.lstrip("+~").split("=", 1)[0].split("@", 1)[0].split("/", 1)[0].split(".", 1)[0] for o in overrides}
    skip = {g for g in UNCOMPOSED if g not in named}
    digest = hashlib.blake2b(f"{_composer_versions()};{sorted(skip)}".encode(), digest_size=16)
    for i, root in enumerate(roots):
        for name, entry in _yaml_files(root, skip=skip):
            data = entry.read_bytes()
            digest.update(f"{i}:{name}:{len(data)}:".encode() + data)
    return digest.hexdigest()


def remembered(roots: Sequence[Any], overrides: Sequence[str], compose: Callable[[], Any]) -> Any:
    """The config ``compose()`` makes from ``overrides`` over the config ``roots``: a copy of the
    one kept for the same tree and overrides, or composed now (and kept when it succeeds)."""
    folder = compose_cache()
    if folder is None:
        return compose()
    tree = tree_digest(roots, overrides)
    key = hashlib.blake2b(repr((tree, list(overrides))).encode(), digest_size=16).hexdigest()
    path = folder / tree / f"{key}.pkl"
    if path.parent not in _touched:
        _touched.add(path.parent)
        try:
            os.utime(path.parent)  # in use: not stale (see _prune)
        except OSError:  # not made yet, or read-only
            pass
    data = _memory.get(key)
    if data is None:
        try:
            data = path.read_bytes()
        except OSError:  # not kept yet (or unreadable): compose it
            pass
    if data is not None:
        try:
            cfg = pickle.loads(data)
            _memory[key] = data
            return cfg
        except Exception:  # a truncated or foreign file: compose it again and keep the new one
            pass
    cfg = compose()
    data = pickle.dumps(cfg)
    _memory[key] = data
    _keep(path, data)
    return cfg


def _keep(path: Path, data: bytes) -> None:
    from posenc.core.io import atomic_write_bytes

    try:
        if not path.parent.is_dir():
            _prune(path.parent.parent)
        atomic_write_bytes(path, data)
    except OSError:  # a read-only or full cache costs the next process its speed, nothing else
        pass


def _prune(folder: Path) -> None:
    """Remove the folders of trees last used more than ``STALE_DAYS`` ago (each edit of a YAML
    file starts a new one)."""
    import shutil

    if not folder.is_dir():
        return
    cutoff = time.time() - STALE_DAYS * 86400
    for tree in folder.iterdir():
        if tree.is_dir() and tree.stat().st_mtime < cutoff:
            shutil.rmtree(tree, ignore_errors=True)
