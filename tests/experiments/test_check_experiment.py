import pandas as pd

from posenc.engine.config import list_options
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
    table, run_dir = run([Scheme("rope_bug", "lm_tiny", OffsetBugRoPE(16), 16)], [], results_root=tmp_path)
    failed = table[~table.passed]
    assert list(failed.check.str.contains("depends only on")) == [True, True]  # float32 and float64
    assert not run_dir.read_summary()["passed"]
    assert pd.read_csv(run_dir.path / "check.csv").shape == table.shape


class NoRotationState(RoPE):
    """Claims to rotate Q and K but has no rotation state to do it with."""

    def rotation(self, positions, dtype):
        return None


def test_a_check_that_cannot_run_on_a_scheme_is_a_failed_row_not_a_crash(tmp_path):
    table, run_dir = run([Scheme("odd", "lm_tiny", NoRotationState(16), 16)], [], results_root=tmp_path)
    assert not table.passed.any()
    assert table.note.str.contains("Error").any()
    assert not run_dir.read_summary()["passed"]
