"""The one training loop: AdamW, linear warmup + cosine decay, gradient clipping, checkpoints.

Two small hooks let a module state what it needs from the loop without the loop naming it:
``no_weight_decay()`` (timm's name) returns the names of parameters the optimizer must not
decay, and ``after_optimizer_step()`` runs after every step (a scheme whose parameters must
stay above a floor clamps their ``.data`` there, as its reference implementation does).

Given one seed, a CPU run is bit-for-bit repeatable: batches come from a seeded generator whose
state is saved in every checkpoint with the optimizer's, so a resumed run continues exactly.
Validation and logging draw no random numbers, so they never shift the batches.

Training runs to criterion: given a ``Target`` (the task's criterion and the value stated in
``train.target_accuracy`` or ``train.target_bpb``), the loop stops at the first validation that
reaches it, or at the step cap ``train.steps``, and says which (``TrainResult.reached_target``,
``target_step``). Validation is deterministic, so a resumed run stops at the same step.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn.functional as F

from posenc.core.dtypes import SHORT, dtype_name
from posenc.core.errors import ConfigError, TrainingDiverged
from posenc.core.io import atomic_write_bytes, replace_folder, settle_folder
from posenc.engine.evaluation import IGNORE_INDEX
from posenc.engine.results import RunDir
from posenc.engine.signals import deferred_stop_signals
from posenc.pe.base import PositionScheme
from posenc.tasks.base import Criterion


@dataclass
class TrainConfig:
    """Optimisation settings; every field is a Hydra override (``train.lr=1e-3``)."""

    steps: int = 300
    batch_size: int = 32
    seq_len: int = 128
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 30
    weight_decay: float = 0.1
    pe_lr_scale: float = 1.0  # the position scheme's own parameters (bias tables, frequencies) train at lr x this
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    log_every: int = 10
    eval_every: int = 100
    checkpoint_every: int = 100
    device: str = "auto"
    target_accuracy: float | None = 0.95  # tasks scored by answer accuracy; null: train to the cap
    target_bpb: float | None = None  # text (bits per byte); null: train to the cap
    precision: str = "fp32"  # fp32, or bf16 / fp16 autocast (positions, angles and biases stay fp32)
    compile: bool = False  # torch.compile the model for the training steps

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "log_every", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ConfigError(f"train.lr must be > 0, got {self.lr}")
        if self.pe_lr_scale <= 0:
            raise ConfigError(f"train.pe_lr_scale must be > 0, got {self.pe_lr_scale}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"train.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.warmup_steps < 0:
            raise ConfigError(f"train.warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            raise ConfigError(f"train.target_accuracy must be in (0, 1] or null, got {self.target_accuracy}")
        if self.target_bpb is not None and not self.target_bpb > 0.0:
            raise ConfigError(f"train.target_bpb must be > 0 (bits per byte) or null, got {self.target_bpb}")
        device = resolve_device(self.device)
        # either spelling (bf16 or bfloat16), kept as the short one, which the code compares against
        long = dtype_name(self.precision, "train.precision")
        self.precision = next(short for short, name in SHORT.items() if name == long)
        if self.precision == "fp16" and device.type not in ("cuda", "cpu"):
            raise ConfigError(f"train.precision=fp16 is not supported on {device.type}; use bf16 or fp32")
        if not isinstance(self.compile, bool):
            raise ConfigError(f"train.compile must be true or false, got {self.compile!r}")


# train.precision (short spelling, see posenc.core.dtypes) -> the autocast dtype (None: no autocast)
PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str):
    """The mixed-precision context of ``train.precision`` on ``device``: matmuls and attention in
    bf16 or fp16, reductions (norms, softmax, cross-entropy) in float32 as autocast decides.
    Models keep positions, rotary angles and position biases in float32 (``pe.base.float32``)."""
    dtype = PRECISIONS[precision]
    return nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


@dataclass(frozen=True)
class Target:
    """The validation score at which a model has learned its task: answer accuracy at or above
    ``value``, or bits per byte at or below it."""

    criterion: Criterion
    value: float

    def reached(self, scores: dict[str, Any]) -> bool:
        """Whether ``evaluate``'s scores (``accuracy``, ``bits``) meet the target."""
        if self.criterion == "accuracy":
            return scores["accuracy"] >= self.value
        return scores["bits"] <= self.value


def target_for(criterion: Criterion, cfg: TrainConfig) -> Target | None:
    """The target ``cfg`` states for a task judged by ``criterion``; None: train to the cap."""
    if criterion not in ("accuracy", "bpb"):
        raise ValueError(f"criterion '{criterion}' is not one of: accuracy, bpb")
    value = cfg.target_accuracy if criterion == "accuracy" else cfg.target_bpb
    return None if value is None else Target(criterion, float(value))


def resolve_device(name: str) -> torch.device:
    """``auto`` picks cuda, then mps, then cpu; an explicit device must exist."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"train.device '{name}' is not a device; valid: auto, cpu, cuda, cuda:N, mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"train.device '{name}' asked for, but no CUDA device is available; use auto or cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"train.device '{name}' asked for, but MPS is not available; use auto or cpu")
    return device


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to ``lr`` over ``warmup_steps``, then cosine decay to ``lr · min_lr_ratio``."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine)


@runtime_checkable
class DeclaresNoWeightDecay(Protocol):
    """A module with parameters the optimizer must not decay (timm's ``no_weight_decay``)."""

    def no_weight_decay(self) -> set[str]:
        """Names of this module's own parameters (as ``named_parameters`` gives them) to leave undecayed."""
        ...


@runtime_checkable
class HasStepHook(Protocol):
    """A module that acts after every optimizer step (e.g. clamps its parameters' ``.data``)."""

    def after_optimizer_step(self) -> None: ...


def no_weight_decay_names(model: torch.nn.Module) -> set[str]:
    """Full names of the parameters every ``DeclaresNoWeightDecay`` submodule of ``model`` declares."""
    names = set()
    for prefix, module in model.named_modules():
        if isinstance(module, DeclaresNoWeightDecay):
            own = dict(module.named_parameters())
            for name in module.no_weight_decay():
                if name not in own:
                    raise ValueError(
                        f"{type(module).__name__}.no_weight_decay() names '{name}', which is not "
                        f"one of its parameters ({', '.join(own) or 'none'})"
                    )
                names.add(f"{prefix}.{name}" if prefix else name)
    return names


def position_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The trainable parameters of ``model``'s position schemes (bias tables, frequencies): the
    ones ``train.pe_lr_scale`` scales."""
    params = {id(p): p for m in model.modules() if isinstance(m, PositionScheme) for p in m.parameters()}
    return [p for p in params.values() if p.requires_grad]


def inert_settings(model: torch.nn.Module) -> frozenset[str]:
    """The train settings that cannot change how ``model`` trains: ``pe_lr_scale`` when its
    position scheme has no trainable parameters (ALiBi, RoPE, NoPE), since the optimizer then
    scales nothing. Two configs that differ only there train the same weights, bit for bit."""
    return frozenset() if position_parameters(model) else frozenset({"pe_lr_scale"})


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only: not on 1D parameters (norms, biases, gains), nor
    on what a module declares in ``no_weight_decay()`` (position tables, frequencies, cls token),
    as timm's ``param_groups_weight_decay`` splits them. With ``pe_lr_scale`` ≠ 1 the position
    scheme's own parameters form groups of their own whose ``lr_scale`` the loop multiplies in:
    Adam moves a parameter by about lr per step whatever its gradient, so a bias table in logit
    units needs ~1/lr steps to reach a bias of 1."""
    skip = no_weight_decay_names(model)
    scaled = {id(p) for p in position_parameters(model)}
    groups: dict[tuple[bool, float], list[torch.nn.Parameter]] = {(True, 1.0): [], (False, 1.0): []}
    for name, p in model.named_parameters():
        if p.requires_grad:
            decays = not (p.dim() < 2 or name in skip)
            scale = cfg.pe_lr_scale if id(p) in scaled else 1.0
            groups.setdefault((decays, scale), []).append(p)
    params = [
        {"params": ps, "weight_decay": cfg.weight_decay if decays else 0.0, "lr_scale": scale}
        for (decays, scale), ps in groups.items()
    ]  # the two unscaled groups first, as before
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))


def step_hooks(model: torch.nn.Module) -> list[HasStepHook]:
    """The submodules of ``model`` that declare ``after_optimizer_step``."""
    return [m for m in model.modules() if isinstance(m, HasStepHook)]


def save_checkpoint(
    folder: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    step: int,
    generator: torch.Generator,
    train_loss: float = float("nan"),
    target_step: int | None = None,
) -> None:
    """``model.safetensors`` (weights) and ``trainer.pt`` (optimizer, step, RNG states, last loss,
    and the step that reached the target, if one did: a resumed run that had stopped stays stopped).

    The two files replace the previous pair together, so a kill never pairs weights of one
    step with optimizer state of another.
    """
    from safetensors.torch import save

    weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "generator": generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        "train_loss": train_loss,
        "target_step": target_step,
    }
    buf = io.BytesIO()
    torch.save(state, buf)

    def fill(new: Path) -> None:
        atomic_write_bytes(new / "model.safetensors", save(weights, metadata={"step": str(step)}))
        atomic_write_bytes(new / "trainer.pt", buf.getvalue())

    replace_folder(folder, fill)


def load_weights(folder: Path, model: torch.nn.Module) -> None:
    from safetensors.torch import load_file

    model.load_state_dict(load_file(str(Path(folder) / "model.safetensors")))


def load_checkpoint(
    folder: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, generator: torch.Generator
) -> dict[str, Any] | None:
    """Restore what ``save_checkpoint`` wrote; return the trainer state (``step``, ``train_loss``,
    ``target_step``), or None when there is no checkpoint yet."""
    settle_folder(folder)
    if not (Path(folder) / "trainer.pt").exists():
        return None
    load_weights(folder, model)
    state = torch.load(
        Path(folder) / "trainer.pt", map_location="cpu", weights_only=True
    )  # optimizer state follows the params
    optimizer.load_state_dict(state["optimizer"])
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    return state


@dataclass
class TrainResult:
    """``steps`` trained (the target's step when it stopped there, else the cap)."""

    steps: int
    train_loss: float
    tokens: int
    seconds: float
    target: Target | None = None
    target_step: int | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / max(self.seconds, 1e-9)

    @property
    def reached_target(self) -> bool | None:
        """Whether validation reached the target; None when no target was stated."""
        return None if self.target is None else self.target_step is not None

    def target_record(self) -> dict[str, Any]:
        """The columns every run records: its criterion and target, whether and when it got there."""
        t = self.target
        return {
            "criterion": t.criterion if t else None,
            "target": t.value if t else None,
            "reached_target": self.reached_target,
            "target_step": self.target_step,
        }


def under_target(label: str, record: dict[str, Any]) -> str | None:
    """The line a run prints when a model ended under its target (``target_record`` and
    ``steps``), saying what to change; None when it reached it or had none."""
    if record.get("reached_target") is not False:
        return None
    sign = "≥" if record["criterion"] == "accuracy" else "≤"
    return (
        f"{label} ended under its target ({record['criterion']} {sign} {record['target']:g} on validation) at its "
        f"{record['steps']}-step cap: its rows say reached_target=False and no finding reads them. Raise "
        "train.steps, or train with the task's measured recipe (configs/train/; a task selects its own unless "
        "train= is given)"
    )


Batches = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


def train(
    model: torch.nn.Module,
    batches: Batches,
    cfg: TrainConfig,
    *,
    seed: int,
    run: RunDir | None = None,
    validate: Callable[[torch.nn.Module], dict[str, Any]] | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    resume: bool = False,
    target: Target | None = None,
) -> TrainResult:
    """Train ``model`` on ``batches(batch_size, generator)`` until ``target`` or ``cfg.steps`` steps.

    The loss is cross-entropy of (…, C) logits against (…) targets, so a language model
    ((b, s, V) against (b, s)) and a classifier ((b, C) against (b,)) share this loop.

    ``validate`` is called every ``eval_every`` steps and at the end; its numbers are logged.
    With a ``target`` (which needs ``validate``), training stops after the first validation
    that reaches it, with a checkpoint of that step.
    Every record logged goes to ``run`` (``metrics.jsonl``) and to ``on_log`` (a progress bar).
    A non-finite loss raises ``TrainingDiverged`` after logging the step that produced it.

    With ``resume``, training continues from ``run``'s checkpoint (if it has one): weights,
    optimizer, step and RNG states come back, and ``metrics.jsonl`` keeps the records up to that
    step, so the log and every loss and score match an uninterrupted run (on CPU, bit for bit;
    only the timing fields differ). While training into ``run``, SIGTERM and SIGINT end the
    current step, save a checkpoint and raise ``Interrupted``.
    """
    if target is not None and validate is None:
        raise ValueError("a target needs validate: the loop checks it on validation scores")
    device = resolve_device(cfg.device)
    model.to(device).train()
    # the compiled module shares the model's parameters; checkpoints and validation use the model
    forward = torch.compile(model) if cfg.compile else model
    # fp16 gradients underflow without loss scaling; bf16 has float32's range and needs none
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16")
    optimizer = make_optimizer(model, cfg)
    hooks = step_hooks(model)
    generator = torch.Generator().manual_seed(seed)
    emit = lambda r: (run.log(r) if run else None, on_log(r) if on_log else None)

    first, loss_value, target_step = 0, float("nan"), None
    if resume and run is not None:
        state = load_checkpoint(run.checkpoint_dir, model, optimizer, generator)
        if state is not None:
            first, loss_value = state["step"], state.get("train_loss", float("nan"))
            target_step = state.get("target_step")
        run.rewind(first)  # records past the checkpoint were never saved with it: redo them
    done = first
    last = first if target_step is not None else cfg.steps  # a run that reached its target is over
    tokens, start, window_tokens, window_start = 0, time.perf_counter(), 0, time.perf_counter()
    with deferred_stop_signals(run.path) if run is not None else nullcontext(lambda: False) as stop:
        for step in range(first, last):
            lr = lr_at(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr * group.get("lr_scale", 1.0)
            x, y = batches(cfg.batch_size, generator)
            x, y = x.to(device), y.to(device)
            with autocast(device, cfg.precision):
                logits = forward(x)  # (b, s, V) or (b, C)
                # no float32 copy of the logits here: autocast runs cross-entropy in float32 itself
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=IGNORE_INDEX)
            loss_value = loss.detach().item()
            if not math.isfinite(loss_value):
                emit({"step": step + 1, "train_loss": loss_value, "lr": lr})
                raise TrainingDiverged(f"loss became {loss_value} at step {step + 1}; lower train.lr or check the data")
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)  # clip the true gradients
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            for hook in hooks:
                hook.after_optimizer_step()
            tokens += x.numel()
            window_tokens += x.numel()
            done = step + 1
            if done % cfg.log_every == 0 or done == cfg.steps:
                now = time.perf_counter()
                emit(
                    {
                        "step": done,
                        "train_loss": loss_value,
                        "lr": lr,
                        "grad_norm": float(grad_norm),
                        "tokens_per_s": window_tokens / max(now - window_start, 1e-9),
                        "elapsed_s": now - start,
                    }
                )
                window_tokens, window_start = 0, now
            if validate is not None and (done % cfg.eval_every == 0 or done == cfg.steps):
                metrics = validate(model)
                if target is not None and target.reached(metrics):
                    target_step = done
                emit(
                    {
                        "step": done,
                        **{f"val_{k}": v for k, v in metrics.items() if not isinstance(v, list)},
                        **({"reached_target": target_step is not None} if target is not None else {}),
                    }
                )
                window_start = time.perf_counter()  # validation time is not training throughput
            stopping = stop()  # read once: a signal arriving now waits for the next step
            reached = target_step is not None
            if run is not None and (done % cfg.checkpoint_every == 0 or done == cfg.steps or stopping or reached):
                save_checkpoint(run.checkpoint_dir, model, optimizer, done, generator, loss_value, target_step)
            if stopping:
                stop.deliver(done)
            if reached:
                break
    return TrainResult(
        steps=done,
        train_loss=loss_value,
        tokens=tokens,
        seconds=time.perf_counter() - start,
        target=target,
        target_step=target_step,
    )
