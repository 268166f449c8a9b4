from experiments.order import order_tasks, plan
from posenc.config import list_options


def test_every_scheme_in_the_tree_is_planned_or_skipped_and_lm_runs_both_masks():
    cells, skipped = plan(models=["lm_tiny"])
    planned = {c.pe for c in cells}
    assert planned | {s["pe"] for s in skipped} == set(list_options("pe"))
    assert {"nope", "rope"} <= planned
    for pe in planned:
        assert sorted(c.attention for c in cells if c.pe == pe) == ["bidirectional", "causal"]
    assert all(c.setup.train.seq_len == 16 for c in cells)  # configs/train/order.yaml by default


def test_a_model_without_a_causal_key_runs_once_labelled_by_its_attribute():
    cells, _ = plan(pes=["nope"], overrides=["~model.causal"])
    assert [(c.model, c.attention) for c in cells] == [("lm_tiny", "causal")]


def test_order_tasks_are_found_by_their_class_flag():
    assert "order" in order_tasks() and "text" not in order_tasks()


def test_user_train_option_wins():
    cells, _ = plan(pes=["nope"], overrides=["train=default"])
    assert cells[0].setup.train.seq_len == 128
