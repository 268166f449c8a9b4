"""Turn a composed config into the objects of a run, checking everything before any work.

Every user mistake that a config can hold (an impossible shape, a learned table shorter than
the training length, a length longer than the corpus) raises ``ConfigError`` here, before a run
directory exists.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from posenc.core.errors import ConfigError
from posenc.engine.config import instantiate, list_options, option_node, target_class, to_container
from posenc.engine.evaluation import EvalConfig
from posenc.engine.training import Target, TrainConfig, resolve_device, target_for
from posenc.pe.grid import check_scheme_fits
from posenc.pe.remap.base import NoRemap
from posenc.tasks.base import InputKind, Task


@dataclass
class Setup:
    config: dict[str, Any]
    task: Task
    model: torch.nn.Module
    train: TrainConfig
    eval: EvalConfig
    seed: int
    # the position remap (configs/remap/) checked here and installed, like a scale, on the model scored
    remap: NoRemap = dataclasses.field(default_factory=NoRemap)

    @property
    def target(self) -> Target | None:
        """Where training stops: the task's ``criterion`` at the value ``train`` states for it."""
        return target_for(self.task.criterion, self.train)

    def place(self, default: torch.device) -> torch.device:
        """The run's device: ``train.device`` when the config names one, else ``default`` (the
        run context's, resolved once); the training loop is set to the same."""
        device = default if self.train.device == "auto" else resolve_device(self.train.device)
        self.train = dataclasses.replace(self.train, device=str(device))
        return device


def takes_patches(cfg: DictConfig) -> bool:
    """Whether the configured model reads image patches (the ViT) rather than tokens."""
    try:
        return model_reads(target_class(cfg.model, "model")) == "patches"
    except ConfigError:
        return False  # instantiate reports the bad _target_


def model_reads(model_class: Any) -> InputKind:
    """What a model class reads, from its declared ``takes_patches`` (absent: tokens)."""
    return "patches" if getattr(model_class, "takes_patches", False) else "tokens"


def option_classes(group: str) -> dict[str, Any]:
    """The class of every option of a group that names one (an option in the global package,
    such as ``vit_tiny``, holds its node under the group's key)."""
    classes = {}
    for name in list_options(group):
        node = option_node(group, name)
        try:
            classes[name] = target_class(node.get(group, node), f"{group}/{name}")
        except ConfigError:
            continue  # an option whose class does not import is reported when it is chosen
    return classes


def trainable_models() -> list[str]:
    """The model options posenc builds and trains (not a pretrained checkpoint, ``trains = False``;
    a class that does not say trains)."""
    return [name for name, cls in option_classes("model").items() if getattr(cls, "trains", True)]


def check_task_fits(task: Task, reads: InputKind, choices: dict[str, Any]) -> None:
    """The task gives what the model ``reads`` (``task.input_kind`` against ``model_reads``),
    else name the models that read the task and the tasks that give what the model reads."""
    if task.input_kind == reads:
        return
    classes = option_classes("model")
    models = [name for name in trainable_models() if model_reads(classes[name]) == task.input_kind]
    tasks = [name for name, cls in option_classes("task").items() if getattr(cls, "input_kind", None) == reads]
    raise ConfigError(
        f"task '{choices['task']}' does not fit model '{choices['model']}'; use --model {', '.join(models)} "
        f"(it reads {task.input_kind}), or a task that gives {reads} ({', '.join(tasks)})"
    )


def build(cfg: DictConfig) -> Setup:
    """The task, the model (seeded) and the train/eval settings of a composed config."""
    if not getattr(target_class(cfg.model, "model"), "trains", True):  # model=pretrained: a checkpoint
        raise ConfigError(
            f"model '{cfg.choices.get('model')}' is a pretrained checkpoint: experiment=real scores it "
            "(posenc extrapolate --model PATH); it is not built or trained"
        )
    if not getattr(target_class(cfg.task, "task"), "trains", True):  # a RULER prompt task: text for a checkpoint
        task = cfg.choices.get("task")
        raise ConfigError(
            f"task '{task}' is a prompt for a pretrained model's tokenizer, scored by experiment=real "
            f"(posenc extrapolate --model PATH --task {task}); posenc's own models train on the token tasks "
            "(posenc list task)"
        )
    patches = takes_patches(cfg)
    # before resolving: 2D options read task keys
    check_scheme_fits(target_class(OmegaConf.to_container(cfg.pe, resolve=False), "pe"), str(cfg.choices.pe), patches)
    config = to_container(cfg)
    seed = config.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"seed: expected an integer, got {seed!r}")
    train_cfg = instantiate(cfg.train, "train")
    eval_cfg = instantiate(cfg.eval, "eval")
    task = instantiate(cfg.task, "task")
    choices = config["choices"]
    check_task_fits(task, "patches" if patches else "tokens", choices)
    size = task.input_size(train_cfg.seq_len)
    task.check_length(size, "train")
    task.check_length(size, "val")
    torch.manual_seed(seed)
    pe = instantiate(cfg.pe, "pe")
    # a 1D table on token positions; the ViT checks its table against its patch grid itself
    if not patches and pe.max_positions is not None and size > pe.max_positions:
        raise ConfigError(
            f"pe '{choices['pe']}' has a table of {pe.max_positions} positions, shorter than "
            f"train.seq_len={size}; raise pe.max_len or lower train.seq_len"
        )
    if pe.randomized and pe.randomized_max < train_cfg.seq_len:
        raise ConfigError(
            f"pe.randomized_max={pe.randomized_max} is shorter than train.seq_len={train_cfg.seq_len}; "
            "randomized positions are drawn from a range at least as long as the sequence"
        )
    remap = instantiate(cfg.remap, "remap") if "remap" in cfg else NoRemap()
    remap.check(pe, str(choices["pe"]), choices.get("remap"))
    model = instantiate(cfg.model, "model", pe=pe, **task.model_inputs())
    if remap.active and not hasattr(model, "set_remap"):
        raise ConfigError(
            f"remap '{choices['remap']}' runs in a causal LM's attention; model '{choices['model']}' has none"
        )
    return Setup(config=config, task=task, model=model, train=train_cfg, eval=eval_cfg, seed=seed, remap=remap)
