"""The training loop: determinism, schedule, divergence, checkpoints, resume and stop signals."""

import json
import math
import os
import signal

import pytest
import torch

from posenc.engine.build import build
from posenc.engine.config import compose
from posenc.core.errors import Interrupted, TrainingDiverged
from posenc.engine.results import RunDir
from posenc.engine.training import TrainConfig, lr_at, train

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


# Resume and stop signals, in process.

OVERRIDES = ["experiment=smoke", "train.steps=12", "train.checkpoint_every=5", "train.log_every=1"]


def start(tmp_path, name):
    setup = build(compose(OVERRIDES))
    run = RunDir.create(tmp_path, name, setup.config)
    return setup, run


def batches_of(setup):
    return lambda b, g: setup.task.train_batch(b, setup.train.seq_len, g)


def logged_losses(run):
    return [(r["step"], r["train_loss"], r["grad_norm"]) for r in run.read_records()]


@pytest.fixture
def interruptible():
    """SIGINT handled by Python's default handler even when the tests run under nohup, which
    starts the process with SIGINT ignored (and the loop rightly leaves an ignored signal alone)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_ends_the_step_saves_it_and_resume_matches_an_uninterrupted_run(tmp_path, signum, interruptible):
    setup, reference = start(tmp_path, "reference")
    train(setup.model, batches_of(setup), setup.train, seed=0, run=reference)

    setup, run = start(tmp_path, "stopped")
    batches = batches_of(setup)

    def stop_at_7(b, g):  # the signal arrives in the middle of step 7
        if len(run.read_records()) == 6:
            os.kill(os.getpid(), signum)
        return batches(b, g)
    with pytest.raises(Interrupted) as info:
        train(setup.model, stop_at_7, setup.train, seed=0, run=run)
    assert info.value.step == 7 and info.value.signum == signum  # not the periodic step 5
    assert str(info.value) == f"stopped by {signal.Signals(signum).name}: checkpoint of step 7 saved in {run.path}; resume with --resume {run.path}"
    assert torch.load(run.checkpoint_dir / "trainer.pt", weights_only=True)["step"] == 7
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored

    setup, _ = start(tmp_path, "unused")  # a fresh model, as a new process would build
    result = train(setup.model, batches_of(setup), setup.train, seed=0, run=RunDir(run.path), resume=True)
    assert logged_losses(RunDir(run.path)) == logged_losses(reference)
    assert result.train_loss == logged_losses(reference)[-1][1]


def test_resume_without_a_checkpoint_starts_from_step_zero(tmp_path):
    setup, reference = start(tmp_path, "reference")
    train(setup.model, batches_of(setup), setup.train, seed=0, run=reference)
    setup, run = start(tmp_path, "fresh")
    run.log({"step": 3, "train_loss": 1.0})  # logged, then killed before the first checkpoint
    train(setup.model, batches_of(setup), setup.train, seed=0, run=run, resume=True)
    assert logged_losses(run) == logged_losses(reference)


def test_a_handler_installed_before_gets_the_signal_after_the_checkpoint_and_may_let_training_go_on(tmp_path):
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))  # like submitit's
    try:
        setup, run = start(tmp_path, "passes")
        batches = batches_of(setup)

        def term_at_7(b, g):
            if len(run.read_records()) == 6:
                os.kill(os.getpid(), signal.SIGTERM)
            return batches(b, g)
        result = train(setup.model, term_at_7, setup.train, seed=0, run=run)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [signal.SIGTERM] and result.steps == 12
    assert [r["step"] for r in run.read_records()] == list(range(1, 13))
