from posenc.engine.config import list_options
from posenc.experiments.order import order_tasks, plan
from posenc.tasks.base import ImageTask


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


def test_an_image_model_and_task_run_through_the_same_protocol(tmp_path):
    """The ViT path: (b, C) logits, tokens from the last block minus the cls row, patches permuted."""
    import torch
    from tiny_models import TinyViT

    from posenc.engine.build import Setup
    from posenc.engine.context import RunContext
    from posenc.engine.evaluation import EvalConfig
    from posenc.engine.training import TrainConfig
    from posenc.experiments.order import Cell, run
    from posenc.pe.learned import LearnedPE
    from posenc.pe.nope import NoPE

    class WhichHalf(ImageTask):
        """Bright patch in the top or the bottom half: the label is where it is, not what it is."""

        name, num_classes, in_channels, resolution, order_labels = "which_half", 2, 3, 8, True

        def train_batch(self, batch_size, size, generator):
            images = 0.1 * torch.rand(batch_size, 3, 8, 8, generator=generator)
            label = torch.randint(0, 2, (batch_size,), generator=generator)
            col = torch.randint(0, 4, (batch_size,), generator=generator) * 2
            for i in range(batch_size):
                row = 4 * int(label[i]) + 2 * int(torch.randint(0, 2, (1,), generator=generator))
                images[i, :, row : row + 2, col[i] : col[i] + 2] = 1.0
            return images, label

        def eval_set(self, size, max_items=None, split="val"):
            return self.train_batch(max_items or 64, size, torch.Generator().manual_seed(5 + (split == "test")))

    def cell(pe, name):
        setup = Setup(
            config={"pe": name},
            task=WhichHalf(),
            model=TinyViT(pe),
            seed=0,
            train=TrainConfig(steps=40, batch_size=32, warmup_steps=2, lr=1e-2, device="cpu"),
            eval=EvalConfig(max_windows=64),
        )
        return Cell("tiny_vit", "bidirectional", name, "which_half", setup)

    result = run(
        [cell(NoPE(ndim=2), "nope"), cell(LearnedPE(16, 16, init_std=0.5), "learned")],
        [],
        RunContext(tmp_path),
        permutations=3,
    )
    table = result.table
    assert table[["pe", "phase", "seed"]].values.tolist() == [
        ["nope", "init", 0],
        ["nope", "trained", 0],
        ["learned", "init", 0],
        ["learned", "trained", 0],
    ]
    rows = table.set_index(["pe", "phase"])
    assert rows.loc[("nope", "trained")].invariant and rows.loc[("nope", "trained")].equivariance_residual < 1e-5
    assert not rows.loc[("nope", "trained")].above_chance  # a bag of patches cannot tell top from bottom
    assert not rows.loc[("learned", "init")].invariant
    assert (table.chance >= 0.5).all()


def test_the_vit_takes_the_first_order_task_it_fits_and_a_content_label_is_not_one():
    import pytest

    from posenc.core.errors import ConfigError

    cells, _ = plan(models=["vit_tiny"], pes=["nope"])
    assert [(c.model, c.task, c.attention, c.setup.task.label) for c in cells] == [
        ("vit_tiny", "shapes", "bidirectional", "quadrant")
    ]
    with pytest.raises(ConfigError, match="does not label order"):
        plan(models=["vit_tiny"], pes=["nope"], overrides=["task.label=shape"])


def test_chance_is_the_stated_one_or_the_most_frequent_class():
    import torch

    from posenc.experiments.order import chance_of
    from posenc.tasks.order import OrderTask

    class TwoClasses(ImageTask):
        num_classes = 2

    assert chance_of(OrderTask(), torch.tensor([[-100, 3]])) == 0.5
    assert chance_of(TwoClasses(), torch.tensor([0, 1, 1, 1])) == 0.75
    assert chance_of(TwoClasses(), torch.tensor([0, 1])) == 0.5


TINY = ["model.d_model=16", "model.n_heads=2", "model.n_layers=1", "model.mlp_hidden=32", "train.steps=2"]


def order_config(*extra):
    from posenc.engine.config import compose

    cells = ",".join(f"'{o}'" for o in [*TINY, "train.batch_size=8", "train.seq_len=8", "eval.max_windows=16"])
    return compose(
        ["experiment=order", "order.models=[lm_tiny]", "order.pes=[nope]", f"order.overrides=[{cells}]", *extra]
    )


def test_the_protocol_from_the_config_writes_its_declared_table_at_the_config_seed(tmp_path):
    from posenc.engine.config import instantiate
    from posenc.engine.context import RunContext, main_table

    cfg = order_config("order.permutations=2", "seed=4")
    protocol = instantiate(cfg.protocol, "protocol")
    protocol.check(cfg)
    events = []
    result = protocol.run(cfg, RunContext(tmp_path, on_event=events.append))
    stages = [(e.label, e.total) for e in events if e.kind == "stage"]
    assert stages == [("order lm_tiny/causal/nope", 2), ("order lm_tiny/bidirectional/nope", 2)]
    assert max(e.done for e in events if e.kind == "advance") == 2
    spec = main_table(protocol)
    assert spec.name == "order" and list(result.tables) == ["order"]
    assert set(spec.keys) | set(spec.pairs) <= set(result.table.columns)
    table = result.table
    assert table[["attention", "phase", "seed", "steps"]].fillna(0).values.tolist() == [
        ["causal", "init", 4, 0],
        ["causal", "trained", 4, 2],
        ["bidirectional", "init", 4, 0],
        ["bidirectional", "trained", 4, 2],
    ]
    summary = result.run.read_summary()
    assert (summary["status"], summary["table"], summary["rows"]) == ("completed", "order", 4)


def test_the_protocol_check_refuses_bad_settings(tmp_path):
    import pytest

    from posenc.core.errors import ConfigError
    from posenc.experiments.order import Order

    with pytest.raises(ConfigError, match="order.permutations must be >= 1, got 0"):
        Order().check(order_config("order.permutations=0"))
    with pytest.raises(ConfigError, match="task 'text' is not an order task"):
        Order().check(order_config("order.tasks=[text]"))


def test_a_failure_mid_run_marks_the_run_folder_failed(tmp_path, monkeypatch):
    import json

    import pytest

    import posenc.experiments.order as order
    from posenc.engine.context import RunContext

    def broken(cell, device, on_log):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(order, "train_cell", broken)
    with pytest.raises(RuntimeError, match="out of memory"):
        order.Order().run(order_config("order.permutations=2"), RunContext(tmp_path))
    (folder,) = (tmp_path / "runs").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert (summary["status"], summary["error"]) == ("failed", "RuntimeError: out of memory")


def test_with_no_models_named_every_model_posenc_trains_is_tried_and_no_checkpoint():
    from posenc.engine.build import trainable_models

    assert "pretrained" in list_options("model") and "pretrained" not in trainable_models()
    cells, skipped = plan(None, ["nope"], None, ["train.steps=1"])
    assert {c.model for c in cells} == set(trainable_models()) == {"lm_tiny", "vit_tiny"}
    assert not [s for s in skipped if s["model"] == "pretrained"]
