"""The algorithmic suite: every 1D scheme on each of Kazemnejad et al.'s tasks, trained at the
task's recipe length L under one recipe per table and scored at L and 2L with no rescaling."""

from posenc.engine.config import compose, options_where
from posenc.launch.suite import load, selected

TASKS = ("copy", "reverse", "addition", "sorting", "summation", "parity")


def test_each_table_holds_every_1d_scheme_under_one_recipe_at_l_and_2l():
    suite = load("algorithmic")
    schemes: dict[str, list[str]] = {}
    recipes: dict[str, set[str]] = {}
    for spec in suite.sweeps:
        pes = selected("pe", spec.select["pe"], spec.name) if spec.select else []
        cfg = compose([*spec.overrides, *([f"pe={pes[0]}"] if pes else []), "seed=0"])  # pe does not move the recipe
        length = cfg.train.seq_len
        assert list(cfg.extrapolation.lengths) == [length, 2 * length], spec.name
        assert list(cfg.extrapolation.scales) == ["none"] and cfg.extrapolation.finetune_steps == 0
        assert cfg.eval.max_windows is None  # the same number of test sequences at L and 2L
        if cfg.choices.pe == "learned":  # rows past L exist, untrained, as the paper's APE
            assert cfg.pe.max_len == 2 * length
        schemes.setdefault(spec.table, []).extend(pes or [cfg.choices.pe])
        recipes.setdefault(spec.table, set()).add(repr((dict(cfg.model), dict(cfg.train))))
    assert set(schemes) == {f"algorithmic_{t}" for t in TASKS}
    every = options_where("pe", lambda c: c.ndim == 1)
    for table, pes in schemes.items():
        assert sorted(pes) == sorted(every) and "nope" in pes, table  # each once, NoPE among them
        assert len(recipes[table]) == 1, table  # one model and one training recipe per table
