"""The training loop: determinism, schedule, divergence, checkpoints, resume and stop signals."""

import json
import math
import os
import signal

import pytest
import torch

from posenc.core.errors import Interrupted, TrainingDiverged
from posenc.engine.build import build
from posenc.engine.config import compose
from posenc.engine.evaluation import evaluate
from posenc.engine.results import RunDir
from posenc.engine.training import Target, TrainConfig, lr_at, target_for, train

TINY = [
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=48",
    "train.seq_len=16",
    "train.batch_size=4",
    "train.steps=12",
    "train.log_every=1",
    "train.warmup_steps=2",
]


def losses(overrides):
    setup = build(compose(TINY + overrides))
    records = []
    train(
        setup.model, lambda b, g: setup.task.train_batch(b, 16, g), setup.train, seed=setup.seed, on_log=records.append
    )
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
    assert (
        str(info.value) == f"stopped by {signal.Signals(signum).name}: checkpoint of step 7 saved in {run.path}; "
        f"resume with --resume {run.path}"
    )
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
NO_DECAY = [
    ("lm_tiny", "learned", ["pe.table"]),
    ("lm_tiny", "t5", ["pe.table"]),
    ("lm_tiny", "relative", ["pe.table"]),
    ("lm_tiny", "fire", None),
    ("lm_tiny", "kerple", None),
    ("vit_tiny", "learned", ["pe.table", "cls"]),
    ("vit_tiny", "learned2d", ["pe.rows", "pe.cols", "cls"]),
    ("vit_tiny", "rope2d_mixed", ["pe.freqs", "cls"]),
    ("vit_tiny", "rel2d", ["pe.table", "cls"]),
]


@pytest.mark.parametrize("model_name,pe,expected", NO_DECAY)
def test_weight_decay_spares_position_parameters_cls_token_and_1d_parameters(model_name, pe, expected):
    """Fails on the old behaviour: every parameter of two or more dimensions was decayed, position
    tables, rope2d_mixed's frequencies, FIRE's MLP and the cls token included. With lr > 0 and
    zero gradients AdamW's only move is the decay: the spared parameters stay, the rest shrink
    by (1 − lr·wd) per step."""
    from posenc.engine.training import make_optimizer

    setup = build(
        compose(
            [
                f"model={model_name}",
                f"pe={pe}",
                "model.d_model=16",
                "model.n_heads=2",
                "model.n_layers=1",
                "model.mlp_hidden=32",
                "train.weight_decay=0.1",
                "train.lr=0.5",
            ]
        )
    )
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


def test_pe_lr_scale_moves_the_position_parameters_that_much_faster():
    """Adam's first step moves every parameter with a gradient by about its lr: with
    ``train.pe_lr_scale=10`` the relative bias table moves 10x as far as at 1, the rest as far."""
    from posenc.engine.training import train

    def moved(scale: float) -> tuple[float, float]:
        setup = build(
            compose(
                [
                    "model=vit_tiny",
                    "pe=rel2d",
                    "model.d_model=16",
                    "model.n_heads=2",
                    "model.n_layers=1",
                    "model.mlp_hidden=32",
                    "model.pool=mean",
                    "task.val_size=8",
                    "train.steps=1",
                    "train.warmup_steps=0",
                    "train.weight_decay=0",
                    "train.lr=1e-3",
                    f"train.pe_lr_scale={scale}",
                    "train.target_accuracy=null",
                    "train.batch_size=4",
                ]
            )
        )
        model = setup.model
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        train(model, lambda b, g: setup.task.train_batch(b, 32, g), setup.train, seed=0)
        step = {n: (p.detach() - before[n]).abs().max().item() for n, p in model.named_parameters()}
        return step["pe.table"], step["head.weight"]

    table_1, head_1 = moved(1.0)
    table_10, head_10 = moved(10.0)
    assert table_1 == pytest.approx(1e-3, rel=0.01) and head_1 == pytest.approx(1e-3, rel=0.01)
    assert table_10 == pytest.approx(1e-2, rel=0.01) and head_10 == pytest.approx(head_1, rel=1e-6)


def test_declared_names_are_collected_with_their_module_prefix_and_checked():
    from posenc.engine.training import no_weight_decay_names

    setup = build(
        compose(["model=vit_tiny", "pe=learned2d", "model.d_model=16", "model.n_heads=2", "model.n_layers=1"])
    )
    assert no_weight_decay_names(setup.model) == {"cls", "pe.rows", "pe.cols"}

    class Wrong(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2, 2))

        def no_weight_decay(self):
            return {"pos_embed"}

    with pytest.raises(ValueError, match="'pos_embed', which is not one of its parameters \\(w\\)"):
        no_weight_decay_names(torch.nn.Sequential(Wrong()))


# Training to criterion.

# One symbol to copy (x SEP x) from four: learned in a few dozen steps, validated every 5.
REACHABLE = [
    "experiment=smoke",
    "task=copy",
    "task.n_symbols=4",
    "train.seq_len=2",
    "train.lr=1e-2",
    "train.steps=200",
    "train.eval_every=5",
    "train.checkpoint_every=5",
    "train.log_every=1",
]


def to_criterion(tmp_path, name, overrides=()):
    setup = build(compose([*REACHABLE, *overrides]))
    run = RunDir.create(tmp_path, name, setup.config)
    periodic = setup.task.eval_set(setup.train.seq_len, setup.eval.periodic_windows)
    validate = lambda m: evaluate(m, *periodic)  # noqa: E731
    return setup, run, validate


def test_training_stops_at_the_first_validation_that_reaches_the_target_and_checkpoints_it(tmp_path):
    setup, run, validate = to_criterion(tmp_path, "reach")
    assert setup.target == Target("accuracy", 0.95)
    result = train(setup.model, batches_of(setup), setup.train, seed=0, run=run, validate=validate, target=setup.target)
    vals = [r for r in run.read_records() if "val_accuracy" in r]
    assert vals[-1]["reached_target"] and vals[-1]["val_accuracy"] >= 0.95
    assert not any(r["reached_target"] or r["val_accuracy"] >= 0.95 for r in vals[:-1])
    assert result.reached_target and result.target_step == result.steps == vals[-1]["step"] < 200
    assert max(r["step"] for r in run.read_records()) == result.steps  # no step after the target
    state = torch.load(run.checkpoint_dir / "trainer.pt", weights_only=True)
    assert state["step"] == state["target_step"] == result.steps
    assert result.target_record() == {
        "criterion": "accuracy",
        "target": 0.95,
        "reached_target": True,
        "target_step": result.steps,
    }


def test_a_run_that_cannot_reach_its_target_trains_to_the_cap_and_says_so(tmp_path):
    setup, run, validate = to_criterion(tmp_path, "cap", ["train.steps=12", "train.lr=1e-6"])
    result = train(setup.model, batches_of(setup), setup.train, seed=0, run=run, validate=validate, target=setup.target)
    assert result.steps == 12 and result.reached_target is False and result.target_step is None
    assert [r["step"] for r in run.read_records() if "val_accuracy" in r] == [5, 10, 12]
    assert torch.load(run.checkpoint_dir / "trainer.pt", weights_only=True)["target_step"] is None


def test_without_a_target_the_record_says_none_and_the_loop_runs_to_the_cap(tmp_path):
    setup, run, validate = to_criterion(tmp_path, "none", ["train.target_accuracy=null", "train.steps=30"])
    assert setup.target is None
    result = train(setup.model, batches_of(setup), setup.train, seed=0, run=run, validate=validate, target=None)
    assert result.steps == 30 and result.reached_target is None
    assert result.target_record() == {"criterion": None, "target": None, "reached_target": None, "target_step": None}


def test_resume_stops_at_the_same_step_and_a_finished_run_stays_finished(tmp_path, interruptible):
    setup, reference, validate = to_criterion(tmp_path, "reference")
    expected = train(
        setup.model, batches_of(setup), setup.train, seed=0, run=reference, validate=validate, target=setup.target
    )
    assert expected.target_step > 7

    setup, run, validate = to_criterion(tmp_path, "stopped")
    batches = batches_of(setup)

    def stop_at_7(b, g):  # before the target: resume must train on and stop where the reference did
        if len([r for r in run.read_records() if "train_loss" in r]) == 6:
            os.kill(os.getpid(), signal.SIGINT)
        return batches(b, g)

    with pytest.raises(Interrupted):
        train(setup.model, stop_at_7, setup.train, seed=0, run=run, validate=validate, target=setup.target)
    for _ in range(2):  # the second resume finds the target's checkpoint and trains no further
        setup, _, validate = to_criterion(tmp_path, "unused")
        result = train(
            setup.model,
            batches_of(setup),
            setup.train,
            seed=0,
            run=RunDir(run.path),
            resume=True,
            validate=validate,
            target=setup.target,
        )
        assert (result.steps, result.target_step) == (expected.steps, expected.target_step)
        assert untimed(RunDir(run.path)) == untimed(reference)


def untimed(run):
    """Every logged record (train and validation) without the fields that measure time."""
    return [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in run.read_records()]


def test_text_is_judged_by_bits_per_byte_at_or_below_its_target():
    setup = build(compose(["experiment=smoke", "train.target_bpb=2.5"]))
    assert setup.target == Target("bpb", 2.5)
    assert setup.target.reached({"accuracy": 0.0, "bits": 2.5}) and not setup.target.reached(
        {"accuracy": 1.0, "bits": 2.6}
    )
    assert build(compose(["experiment=smoke"])).target is None  # text trains to the cap unless a target is stated
    assert target_for("accuracy", TrainConfig(target_accuracy=0.9)).reached({"accuracy": 0.9, "bits": 9.0})
    with pytest.raises(ValueError, match="target needs validate"):
        train(setup.model, batches_of(setup), setup.train, seed=0, target=setup.target)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("target_accuracy", 1.5, "train.target_accuracy must be in (0, 1] or null, got 1.5"),
        ("target_accuracy", 0.0, "train.target_accuracy must be in (0, 1] or null, got 0.0"),
        ("target_bpb", -1.0, "train.target_bpb must be > 0 (bits per byte) or null, got -1.0"),
    ],
)
def test_a_target_out_of_range_is_a_config_error(field, value, message):
    from posenc.core.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        TrainConfig(**{field: value})
    assert str(info.value) == message


def test_a_precision_not_offered_is_a_config_error():
    from posenc.core.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        TrainConfig(precision="fp8")
    assert str(info.value) == "train.precision 'fp8' is not one of: fp32, float32, bf16, bfloat16, fp16, float16"


@pytest.mark.parametrize("precision,tolerance", [("bf16", 0.05), ("fp16", 0.01)])
def test_mixed_precision_trains_like_float32(precision, tolerance):
    """bf16 (and fp16, with loss scaling) autocast on the CPU: the same run's losses stay within
    the half type's rounding of float32's, and fall; the weights stay float32."""
    reference = losses(["pe=rope"])
    mixed = losses(["pe=rope", f"train.precision={precision}"])
    assert all(math.isfinite(v) for v in mixed) and mixed[-1] < mixed[0]
    assert max(abs(a - b) for a, b in zip(mixed, reference)) < tolerance
    assert mixed != reference  # autocast did run


@pytest.mark.slow
def test_compiled_training_matches_eager():
    """train.compile=true (torch.compile; the first step compiles, ~30-60 s on two CPU cores)
    gives the eager run's losses to float32 rounding."""
    eager = losses(["pe=rope", "train.steps=3"])
    compiled = losses(["pe=rope", "train.steps=3", "train.compile=true"])
    assert len(compiled) == 3
    assert compiled == pytest.approx(eager, rel=1e-4)
