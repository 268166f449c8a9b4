import json

import pandas as pd

from posenc.engine.config import list_options
from posenc.engine.context import RunContext
from posenc.experiments.check import Scheme, is_fixed_embedding, measurements, plan, run
from posenc.pe.rope import RoPE


def test_every_scheme_in_the_tree_is_planned_or_skipped_with_a_reason():
    schemes, skipped = plan()
    names = [s.name for s in schemes] + [s["pe"] for s in skipped]
    assert sorted(names) == sorted(list_options("pe"))
    assert all(s["reason"] for s in skipped)


def test_checks_are_chosen_by_capability():
    schemes = {s.name: s for s in plan(["nope", "learned", "sinusoidal", "rope"])[0]}
    kinds = {name: {m.kind for m in measurements(s)} for name, s in schemes.items() if name != "rope"}
    assert kinds == {"nope": set(), "learned": set(), "sinusoidal": {"c4_shift"}}
    assert not is_fixed_embedding(schemes["learned"].pe)  # trainable: C4 is not claimed for it


class OffsetBugRoPE(RoPE):
    def rotation(self, positions, dtype):
        return super().rotation(positions + (positions >= 100).long(), dtype)


def test_a_broken_scheme_fails_in_the_table_and_the_summary(tmp_path):
    result = run([Scheme("rope_bug", "lm_tiny", OffsetBugRoPE(16), 16)], [], RunContext(tmp_path))
    table, run_dir = result.table, result.run
    failed = table[~table.passed]
    assert list(failed.check.str.contains("depends only on")) == [True, True]  # float32 and float64
    assert not run_dir.read_summary()["passed"]
    assert pd.read_csv(run_dir.path / "check.csv").shape == table.shape


class NoRotationState(RoPE):
    """Claims to rotate Q and K but has no rotation state to do it with."""

    def rotation(self, positions, dtype):
        return None


def test_a_check_that_cannot_run_on_a_scheme_is_a_failed_row_not_a_crash(tmp_path):
    result = run([Scheme("odd", "lm_tiny", NoRotationState(16), 16)], [], RunContext(tmp_path))
    table, run_dir = result.table, result.run
    assert not table.passed.any()
    assert table.note.str.contains("Error").any()
    assert not run_dir.read_summary()["passed"]


def test_the_protocol_runs_from_the_composed_config_and_writes_its_declared_table(tmp_path):
    from posenc.engine.config import compose, instantiate
    from posenc.engine.context import main_table

    cfg = compose(["experiment=check", "check.pes=[rope]", "seed=3"])
    protocol = instantiate(cfg.protocol, "protocol")
    protocol.check(cfg)
    result = protocol.run(cfg, RunContext(tmp_path))
    spec = main_table(protocol)
    assert spec.name == "check" and list(result.tables) == ["check"]
    assert set(spec.keys) | set(spec.pairs) <= set(result.table.columns)
    assert (result.table.seed == 3).all() and result.table.passed.all() and len(result.table) == 7
    summary = result.run.read_summary()
    assert (summary["status"], summary["table"], summary["passed"]) == ("completed", "check", True)
    assert (result.run.path / "provenance.json").is_file()


def test_the_protocol_check_refuses_an_unknown_scheme_before_any_work(tmp_path):
    import pytest

    from posenc.core.errors import ConfigError
    from posenc.engine.config import compose
    from posenc.experiments.check import Check

    with pytest.raises(ConfigError, match="unknown pe 'nosuch'"):
        Check().check(compose(["experiment=check", "check.pes=[nosuch]"]))


def test_a_failure_mid_run_marks_the_run_folder_failed(tmp_path, monkeypatch):
    import pytest

    import posenc.experiments.check as check

    def broken(results, folder, fmt):
        raise RuntimeError("disk full")

    monkeypatch.setattr(check, "plot", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        run([Scheme("rope", "lm_tiny", RoPE(16), 16)], [], RunContext(tmp_path))
    (folder,) = (tmp_path / "runs").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert (summary["status"], summary["error"]) == ("failed", "RuntimeError: disk full")


def test_with_no_models_named_a_scheme_is_built_with_the_models_posenc_trains():
    schemes, skipped = plan(["rope"])
    assert {s.model for s in schemes} == {"lm_tiny"} and not [s for s in skipped if "pretrained" in str(s)]
