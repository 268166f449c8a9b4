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

        def eval_set(self, resolution=None, max_items=None):
            return self.train_batch(max_items or 64, 8, torch.Generator().manual_seed(5))

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

    table, _ = run(
        [cell(NoPE(ndim=2), "nope"), cell(LearnedPE(16, 16, init_std=0.5), "learned")],
        [],
        permutations=3,
        results_root=tmp_path,
    )
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
