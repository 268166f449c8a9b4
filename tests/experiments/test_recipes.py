"""One recipe per comparison: a declared grid of train settings, one selection rule on the
validation split for every scheme, and the pick recorded in the tables."""

import pytest
import torch

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


def trained_weights(overrides):
    from posenc.engine.build import build
    from posenc.engine.training import train

    setup = build(compose([*JOB, "train.steps=20", *overrides]))
    train(setup.model, lambda b, g: setup.task.train_batch(b, 16, g), setup.train, seed=0)
    return setup.model.state_dict()


def test_pe_lr_scale_is_inert_exactly_when_the_scheme_has_no_position_parameters():
    from posenc.engine.build import build
    from posenc.engine.training import inert_settings

    assert inert_settings(build(compose([*JOB, "pe=alibi"])).model) == {"pe_lr_scale"}
    assert inert_settings(build(compose([*JOB, "pe=t5"])).model) == frozenset()
    # what makes it safe to train such grid points once: the weights are the same, bit for bit
    one, ten = trained_weights(["pe=alibi"]), trained_weights(["pe=alibi", "train.pe_lr_scale=10"])
    assert all(torch.equal(one[k], ten[k]) for k in one)
    one, ten = trained_weights(["pe=t5"]), trained_weights(["pe=t5", "train.pe_lr_scale=10"])
    assert not all(torch.equal(one[k], ten[k]) for k in one)


@pytest.mark.parametrize(("pe", "models"), [("alibi", 1), ("t5", 2)])
def test_grid_points_that_cannot_act_on_a_scheme_share_one_training(tmp_path, pe, models):
    cfg = compose([*JOB, f"pe={pe}", "train.steps=30", "+extrapolation.recipes={pe_lr_scale: [1, 10]}"])
    result = Extrapolation().run(cfg, RunContext(tmp_path))
    assert len([p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]) == models
    recipes = result.tables["recipes"]
    assert recipes.recipe.tolist() == ["train.pe_lr_scale=1", "train.pe_lr_scale=10"]
    if models == 1:  # ALiBi: both rows read the model trained at the first point, the rule takes the first
        assert recipes.trained_as.tolist() == ["train.pe_lr_scale=1"] * 2
        assert recipes.val_score[0] == recipes.val_score[1] and recipes.picked.tolist() == [True, False]
    else:
        assert recipes.trained_as.tolist() == recipes.recipe.tolist()
