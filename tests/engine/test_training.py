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


class KerpleScores(torch.nn.Module):
    """Attention scores of one KERPLE head used as logits over keys: the target key of each query
    is itself, so the loss asks for a larger penalty on distance (r1 and r2 grow)."""

    def __init__(self):
        super().__init__()
        from posenc.pe.kerple import KerpleLogPE

        self.pe = KerpleLogPE(n_heads=1)

    def forward(self, x):
        pos = torch.arange(x.shape[1])
        return self.pe.bias(pos, pos)[0].expand(x.shape[0], -1, -1)  # (b, s, s)


def test_a_kerple_parameter_driven_below_eps_recovers():
    """Fails on the old behaviour: KERPLE clamped r1 inside the forward pass, so r1 = −0.06 got
    zero gradient and stayed at −0.06; now the training loop calls ``after_optimizer_step``,
    which clamps ``.data`` to eps, and the gradient takes r1 back up (as in chijames/KERPLE)."""
    model = KerpleScores()
    with torch.no_grad():
        model.pe.r1.fill_(-0.06)
    cfg = TrainConfig(steps=150, batch_size=2, seq_len=8, lr=0.01, warmup_steps=0, device="cpu")
    s = cfg.seq_len
    train(model, lambda b, g: (torch.zeros(b, s, dtype=torch.long), torch.arange(s).expand(b, s)), cfg, seed=0)
    assert model.pe.r1.item() > 0.5  # recovers, well past eps
    assert model.pe.r2.item() >= model.pe.eps


# every parameter of these schemes is a position parameter; the ViT adds its cls token
NO_DECAY = [("lm_tiny", "learned", ["pe.table"]), ("lm_tiny", "t5", ["pe.table"]),
            ("lm_tiny", "relative", ["pe.table"]), ("lm_tiny", "fire", None), ("lm_tiny", "kerple", None),
            ("vit_tiny", "learned", ["pe.table", "cls"]), ("vit_tiny", "learned2d", ["pe.rows", "pe.cols", "cls"]),
            ("vit_tiny", "rope2d_mixed", ["pe.freqs", "cls"]), ("vit_tiny", "rel2d", ["pe.table", "cls"])]


@pytest.mark.parametrize("model_name,pe,expected", NO_DECAY)
def test_weight_decay_spares_position_parameters_cls_token_and_1d_parameters(model_name, pe, expected):
    """Fails on the old behaviour: every parameter of two or more dimensions was decayed, position
    tables, rope2d_mixed's frequencies, FIRE's MLP and the cls token included. With lr > 0 and
    zero gradients AdamW's only move is the decay: the spared parameters stay, the rest shrink
    by (1 − lr·wd) per step."""
    from posenc.engine.training import make_optimizer

    setup = build(compose([f"model={model_name}", f"pe={pe}", "model.d_model=16", "model.n_heads=2",
                           "model.n_layers=1", "model.mlp_hidden=32", "train.weight_decay=0.1", "train.lr=0.5"]))
    model = setup.model
    spared = {f"pe.{n}" for n, _ in model.pe.named_parameters()} | ({"cls"} if model_name == "vit_tiny" else set())
    assert expected is None or spared == set(expected)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = make_optimizer(model, setup.train)
    for _ in range(3):
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        optimizer.step()
    shrink = (1 - 0.5 * 0.1) ** 3
    for name, p in model.named_parameters():
        if name in spared or p.dim() < 2:
            assert torch.equal(p, before[name]), name
        else:
            torch.testing.assert_close(p.detach(), before[name] * shrink, msg=name)


def test_declared_names_are_collected_with_their_module_prefix_and_checked():
    from posenc.engine.training import no_weight_decay_names

    setup = build(compose(["model=vit_tiny", "pe=learned2d", "model.d_model=16", "model.n_heads=2", "model.n_layers=1"]))
    assert no_weight_decay_names(setup.model) == {"cls", "pe.rows", "pe.cols"}

    class Wrong(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2, 2))

        def no_weight_decay(self):
            return {"pos_embed"}

    with pytest.raises(ValueError, match="'pos_embed', which is not one of its parameters \\(w\\)"):
        no_weight_decay_names(torch.nn.Sequential(Wrong()))
