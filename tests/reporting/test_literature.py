"""configs/findings.yaml: what the literature says, with citations; the report's code names no
scheme or scaling (the data file names a paper's subjects, classes say the rest)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from posenc.core.errors import ConfigError
from posenc.engine.config import list_options
from posenc.pe.grid import METHODS
from posenc.reporting.claims import CLAIMS
from posenc.reporting.findings import FINDINGS
from posenc.reporting.literature import Entry, claim, finding, literature

REPORTING = Path(__file__).resolve().parents[2] / "posenc" / "reporting"


def test_every_claim_and_finding_is_in_the_data_file_with_its_citation():
    data = literature()
    assert list(data["claims"]) == [f"C{n}" for n in range(1, 13)] == [f.__name__.upper() for f in CLAIMS]
    assert len(data["findings"]) == len(FINDINGS)
    for key, entry in data["findings"].items():
        assert entry.paper and entry.statement and entry.numbers, key
        assert re.fullmatch(r"\d{4}\.\d{5}", entry.arxiv), key
        assert f"arxiv.org/abs/{entry.arxiv}" in entry.cited()
    assert finding("ALiBi").margin("flat_bits") == 0.02 and finding("YaRN").margin("equal_bits") == 0.05
    assert finding("ViT").effect("worse").value == -0.028 and finding("NoPE").effect("anything") is None
    assert finding("YaRN").order["beyond"] == [["yarn", "≲", "ntk"], ["ntk", "≪", "pi"]]


def test_prose_fields_are_filled_and_a_wrong_one_is_named():
    assert "Our 3-layer model trained at 64 bytes" in finding("ALiBi").say(
        "why_not", model="3-layer model", train_length="64", multiple="16×", seeds="3 seeds"
    )
    with pytest.raises(ConfigError, match=r"ALiBi.why_not names \{model\}; valid here: seeds"):
        finding("ALiBi").say("why_not", seeds="3 seeds")
    with pytest.raises(ConfigError, match="C3 has no subject 'nothere'; it has: tables, methods"):
        claim("C3").subject("nothere")
    with pytest.raises(ConfigError, match="no finding 'Nothere'"):
        finding("Nothere")
    assert Entry("X", "t", "s").cited() == "Published (): s"


def _strings(path: Path) -> set[str]:
    return {
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


@pytest.mark.parametrize("module", ["claims", "findings", "tables", "estimates", "plots", "reference_report"])
def test_the_report_code_names_no_scheme_or_scaling(module):
    """The old claims.py and findings.py kept tuples such as ("alibi", "sinusoidal", "rope", …) and
    SCALES = ("none", "pi", "ntk", "yarn"); names now come from the tables, classes and data file.
    (Resolution methods such as ``interpolate`` are grid methods, not scalings; ``relative`` is also
    a value of a class's ``encodes``.)"""
    names = (set(list_options("pe")) | set(list_options("scale"))) - set(METHODS) - {"nothing", "absolute", "relative"}
    assert _strings(REPORTING / f"{module}.py") & names == set()
