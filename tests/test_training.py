import json
import math

import pytest
import torch

from posenc.build import build
from posenc.config import compose
from posenc.errors import TrainingDiverged
from posenc.results import RunDir
from posenc.training import TrainConfig, lr_at, train

TINY = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.mlp_hidden=48",
        "train.seq_len=16", "train.batch_size=4", "train.steps=12", "train.log_every=1",
        "train.warmup_steps=2"]


def losses(overrides):
    setup = build(compose(TINY + overrides))
    records = []
    train(setup.model, lambda b, g: setup.task.train_batch(b, 16, g), setup.train,
          seed=setup.seed, on_log=records.append)
    return [r["train_loss"] for r in records]


def test_same_seed_same_losses_other_seed_other_losses():
    a, b = losses(["pe=rope"]), losses(["pe=rope"])
    assert a == b
    assert len(a) == 12
    assert a[-1] < a[0]
    assert losses(["pe=rope", "seed=1"]) != a


def test_warmup_then_cosine_to_the_floor():
    cfg = TrainConfig(steps=110, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(0.1)
    assert lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(10, cfg) == pytest.approx(1.0)
    assert lr_at(60, cfg) == pytest.approx(0.55)
    assert lr_at(110, cfg) == pytest.approx(0.1)


def test_non_finite_loss_stops_and_is_logged(tmp_path):
    setup = build(compose(TINY))
    run = RunDir.create(tmp_path, "nan", {"x": 1})
    with torch.no_grad():
        setup.model.embed.weight[5] = float("nan")
    batches = lambda b, g: (torch.full((b, 16), 5), torch.full((b, 16), 5))  # noqa: E731
    with pytest.raises(TrainingDiverged, match="loss became nan at step 1"):
        train(setup.model, batches, setup.train, seed=0, run=run)
    record = json.loads((run.path / "metrics.jsonl").read_text().splitlines()[-1])
    assert math.isnan(record["train_loss"])


def test_checkpoints_hold_weights_and_trainer_state(tmp_path):
    from safetensors.torch import load_file

    setup = build(compose(TINY + ["train.checkpoint_every=5"]))
    run = RunDir.create(tmp_path, "ckpt", {"x": 1})
    train(setup.model, lambda b, g: setup.task.train_batch(b, 16, g), setup.train, seed=0, run=run)
    weights = load_file(str(run.checkpoint_dir / "model.safetensors"))
    assert set(weights) == set(setup.model.state_dict())
    assert torch.equal(weights["embed.weight"], setup.model.embed.weight.detach())
    state = torch.load(run.checkpoint_dir / "trainer.pt", weights_only=False)
    assert state["step"] == 12
    assert "state" in state["optimizer"]
