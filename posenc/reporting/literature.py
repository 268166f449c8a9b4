"""What the literature says, read from ``configs/findings.yaml``: the seed document's claims
C1–C12 and the published findings, each with its citation, figures, thresholds, subjects and
prose. Code computes; this file's data says what the paper found.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import yaml

from posenc.core.errors import ConfigError
from posenc.engine.config import config_root
from posenc.reporting.estimates import Effect

FILE = "findings.yaml"


@dataclass(frozen=True)
class Entry:
    """One claim or finding: its key (``C5``, ``ALiBi``) and its fields from the data file."""

    key: str
    title: str
    statement: str
    paper: str = ""
    arxiv: str = ""
    numbers: str = ""
    subjects: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    order: dict[str, list[list[str]]] = field(default_factory=dict)
    prose: dict[str, str] = field(default_factory=dict)
    margins: dict[str, float] = field(default_factory=dict)
    effects: dict[str, dict[str, Any]] = field(default_factory=dict)

    def subject(self, name: str) -> Any:
        if name not in self.subjects:
            raise ConfigError(
                f"{FILE}: {self.key} has no subject '{name}'; it has: {', '.join(self.subjects) or 'none'}"
            )
        return self.subjects[name]

    def threshold(self, name: str) -> float:
        if name not in self.thresholds:
            raise ConfigError(f"{FILE}: {self.key} has no threshold '{name}'")
        return float(self.thresholds[name])

    def margin(self, name: str) -> float:
        """An equivalence margin of the verdict's tests (``margins:``; its comment says why)."""
        if name not in self.margins:
            raise ConfigError(f"{FILE}: {self.key} has no margin '{name}'; it has: {', '.join(self.margins) or 'none'}")
        return float(self.margins[name])

    def effect(self, name: str) -> Effect | None:
        """The paper's effect ``name`` (``effects:``: value, what it is, where the paper gives it), or
        None where the paper gives no number for it."""
        node = self.effects.get(name)
        if node is None:
            return None
        missing = {"value", "of", "source"} - set(node)
        if missing:
            raise ConfigError(f"{FILE}: {self.key}.effects.{name} needs {', '.join(sorted(missing))}")
        return Effect(float(node["value"]), str(node["of"]), str(node["source"]), bool(node.get("comparable", True)))

    def say(self, name: str, **values: Any) -> str:
        """The prose ``name`` with its ``{fields}`` filled in from ``values``."""
        if name not in self.prose:
            raise ConfigError(f"{FILE}: {self.key} has no text '{name}'; it has: {', '.join(self.prose)}")
        text = self.prose[name]
        wanted = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        unknown = wanted - set(values)
        if unknown:
            raise ConfigError(
                f"{FILE}: {self.key}.{name} names {{{sorted(unknown)[0]}}}; valid here: {', '.join(sorted(values))}"
            )
        return text.format(**values)

    def cited(self) -> str:
        """The published statement with its paper, figures and arXiv id (a finding's header)."""
        link = f", [arXiv:{self.arxiv}](https://arxiv.org/abs/{self.arxiv})" if self.arxiv else ""
        figures = f" {self.numbers}" if self.numbers else ""
        return f"Published ({self.paper}{link}): {self.statement}{figures}"


_FIELDS = (
    "title",
    "statement",
    "found",
    "paper",
    "arxiv",
    "numbers",
    "subjects",
    "thresholds",
    "order",
    "margins",
    "effects",
)


def _entry(key: str, node: dict[str, Any]) -> Entry:
    if not isinstance(node, dict) or "title" not in node or not ({"statement", "found"} & set(node)):
        raise ConfigError(f"{FILE}: {key} needs a title and a statement (claims) or found (findings)")
    return Entry(
        key,
        str(node["title"]),
        str(node.get("statement", node.get("found"))),
        str(node.get("paper", "")),
        str(node.get("arxiv", "")),
        str(node.get("numbers", "")),
        dict(node.get("subjects") or {}),
        dict(node.get("thresholds") or {}),
        dict(node.get("order") or {}),
        {k: str(v) for k, v in node.items() if k not in _FIELDS},
        dict(node.get("margins") or {}),
        dict(node.get("effects") or {}),
    )


@cache
def literature() -> dict[str, dict[str, Entry]]:
    """``{"claims": {"C1": Entry, …}, "findings": {"ViT": Entry, …}}`` in the file's order."""
    try:
        data = yaml.safe_load((config_root() / FILE).read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{FILE} is not valid YAML{where}: {str(e).splitlines()[0]}") from None
    return {
        part: {key: _entry(key, node) for key, node in (data.get(part) or {}).items()}
        for part in ("claims", "findings")
    }


@cache
def verdict_settings() -> dict[str, Any]:
    """How verdicts are decided (``verdicts:`` in the data file): the multiple-testing correction
    within each family (``holm`` or ``bh``, Benjamini–Hochberg) and the family-wise level ``alpha``."""
    data = yaml.safe_load((config_root() / FILE).read_text()) or {}
    node = {"correction": "holm", "alpha": 0.05, **(data.get("verdicts") or {})}
    if node["correction"] not in ("holm", "bh") or not 0 < float(node["alpha"]) < 1:
        raise ConfigError(
            f"{FILE}: verdicts.correction must be holm or bh and verdicts.alpha in (0, 1), got "
            f"{node['correction']!r} and {node['alpha']!r}"
        )
    return {"correction": str(node["correction"]), "alpha": float(node["alpha"])}


def claim(key: str) -> Entry:
    return _get("claims", key)


def finding(key: str) -> Entry:
    return _get("findings", key)


def _get(part: str, key: str) -> Entry:
    entries = literature()[part]
    if key not in entries:
        raise ConfigError(f"{FILE}: no {part[:-1]} '{key}'; it has: {', '.join(entries)}")
    return entries[key]
