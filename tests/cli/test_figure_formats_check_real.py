"""``plots.format`` reaches the figures of ``posenc check`` (and its sweep protocol) and of a real
model's run; an unknown format is one line and exit 2 before any run folder exists."""

from __future__ import annotations

import pytest

FIGURES = (".png", ".svg", ".pdf")
MAGIC = {"svg": b"<?xml", "pdf": b"%PDF-", "png": b"\x89PNG"}


def figures(run) -> list[str]:
    return sorted(p.name for p in run.iterdir() if p.suffix in FIGURES)


def test_check_writes_every_figure_in_the_configured_format(cli, tmp_path):
    code, out, err = cli("check", "--pe", "rope", "--results-dir", tmp_path / "ok", "-q", "plots.format=svg")
    assert code == 0, out + err
    (run,) = (tmp_path / "ok" / "runs").iterdir()
    assert figures(run) == ["c10_decay.svg", "c10_periodicity.svg", "c9_norm.svg", "c9_relative.svg", "c9_values.svg"]
    assert all((run / f).read_bytes().startswith(MAGIC["svg"]) for f in figures(run))
    code, _, err = cli("check", "--pe", "rope", "--results-dir", tmp_path / "bad", "plots.format=jpg")
    assert code == 2 and err.strip() == "error: plots.format: unknown format 'jpg'; valid: png, svg, pdf"
    assert not (tmp_path / "bad" / "runs").exists()


def test_the_check_protocol_of_a_sweep_job_honours_it_too(tmp_path):
    from posenc.core.errors import ConfigError
    from posenc.engine.config import compose
    from posenc.engine.context import RunContext
    from posenc.experiments.check import Check

    job = ["experiment=check", "check.pes=[t5]"]
    result = Check().run(compose([*job, "plots.format=pdf"]), RunContext(tmp_path))
    assert figures(result.run.path) == ["c8_bias.pdf"] == result.run.read_summary()["figures"]
    assert (result.run.path / "c8_bias.pdf").read_bytes().startswith(MAGIC["pdf"])
    with pytest.raises(ConfigError, match="plots.format: unknown format 'eps'"):
        Check().check(compose([*job, "plots.format=eps"]))


def test_a_real_model_writes_its_figures_in_the_configured_format(cli, real_models, tmp_path):
    pytest.importorskip("transformers")
    args = ["extrapolate", "--model", real_models["gguf"], "--scale", "pi", "--lengths", "200,260"]
    args += ["--passkey", "0,100", "--windows", "1", "--device", "cpu", "-q"]
    code, _, err = cli(*args, "--results-dir", tmp_path / "ok", "plots.format=pdf")
    assert code == 0, err
    (run,) = (tmp_path / "ok" / "runs").iterdir()
    assert figures(run) == ["passkey.pdf", "per_position.pdf"]
    assert all((run / f).read_bytes().startswith(MAGIC["pdf"]) for f in figures(run))
    code, _, err = cli(*args, "--results-dir", tmp_path / "bad", "plots.format=tiff")
    assert code == 2 and err.strip() == "error: plots.format: unknown format 'tiff'; valid: png, svg, pdf"
    assert not (tmp_path / "bad" / "runs").exists()
