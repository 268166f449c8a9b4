"""One recipe per comparison: a declared grid of train settings, one selection rule on the
validation split for every scheme, and the pick recorded in the tables."""

import pytest

from posenc.core.errors import ConfigError
from posenc.engine.config import compose
from posenc.engine.context import RunContext
from posenc.experiments.extrapolation.protocol import Extrapolation, pick, recipe_grid, recipe_label

JOB = [
    "experiment=extrapolation",
    "task=passkey",
    "train=default",
    "model.d_model=16",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=32",
    "train.steps=150",
    "train.batch_size=16",
    "train.seq_len=16",
    "train.warmup_steps=2",
    "train.eval_every=10",
    "train.checkpoint_every=100",
    "task.trials=4",
    "extrapolation.scales=[none]",
    "extrapolation.lengths=[16,32]",
]


def candidate(reached, step, score, criterion="accuracy"):
    return {
        "reached_target": reached,
        "target_step": step if reached else None,
        "val_score": score,
        "criterion": criterion,
    }


def test_the_rule_prefers_reaching_the_target_soonest_then_the_best_validation_score():
    assert pick([candidate(False, None, 0.9), candidate(True, 400, 0.95), candidate(True, 300, 0.95)]) == 2
    assert pick([candidate(False, None, 0.5), candidate(False, None, 0.8), candidate(False, None, 0.8)]) == 1
    assert pick([candidate(False, None, 2.9, "bpb"), candidate(False, None, 2.6, "bpb")]) == 1  # bits: lower
    assert pick([candidate(True, 100, 0.95), candidate(True, 100, 0.99)]) == 1  # same step: better score


def test_the_grid_is_every_combination_of_train_settings_in_order():
    grid = recipe_grid({"lr": [1e-3, 3e-3], "pe_lr_scale": [1, 10]})
    assert [recipe_label(r) for r in grid] == [
        "train.lr=0.001 train.pe_lr_scale=1",
        "train.lr=0.001 train.pe_lr_scale=10",
        "train.lr=0.003 train.pe_lr_scale=1",
        "train.lr=0.003 train.pe_lr_scale=10",
    ]
    assert recipe_grid(None) == [{}]
    with pytest.raises(ConfigError, match="'n_layers' is not a train setting"):
        recipe_grid({"n_layers": [2, 4]})
    with pytest.raises(ConfigError, match="recipes.lr must be a non-empty list"):
        recipe_grid({"lr": []})


def test_each_scheme_is_scored_under_the_recipe_its_validation_picks(tmp_path):
    cfg = compose([*JOB, "+extrapolation.recipes={lr: [1.0e-7, 1.0e-2]}"])
    result = Extrapolation().run(cfg, RunContext(tmp_path))
    recipes = result.tables["recipes"]
    assert recipes.recipe.tolist() == ["train.lr=1e-07", "train.lr=0.01"]
    # lr 1e-7 barely moves from initialisation: the rule picks the other on validation
    assert recipes.picked.tolist() == [False, True] and recipes.val_score[1] > recipes.val_score[0]
    table = result.tables["table"]
    assert set(table.recipe) == {"train.lr=0.01"} and len(table) == 3  # exact_match, accuracy, loss
    assert set(result.tables["depth"].recipe) == {"train.lr=0.01"}
