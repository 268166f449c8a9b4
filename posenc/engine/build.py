"""Turn a composed config into the objects of a run, checking everything before any work.

Every user mistake that a config can hold (an impossible shape, a learned table shorter than
the training length, a length longer than the corpus) raises ``ConfigError`` here, before a run
directory exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from posenc.core.errors import ConfigError
from posenc.engine.config import instantiate, target_class, to_container
from posenc.engine.evaluation import EvalConfig
from posenc.engine.training import Target, TrainConfig, target_for
from posenc.pe.grid import check_scheme_fits
from posenc.tasks.base import Task


@dataclass
class Setup:
    config: dict[str, Any]
    task: Task
    model: torch.nn.Module
    train: TrainConfig
    eval: EvalConfig
    seed: int

    @property
    def target(self) -> Target | None:
        """Where training stops: the task's ``criterion`` at the value ``train`` states for it."""
        return target_for(self.task.criterion, self.train)


def takes_patches(cfg: DictConfig) -> bool:
    """Whether the configured model reads image patches (the ViT) rather than tokens."""
    try:
        return bool(getattr(target_class(cfg.model, "model"), "takes_patches", False))
    except ConfigError:
        return False  # instantiate reports the bad _target_


def build(cfg: DictConfig) -> Setup:
    """The task, the model (seeded) and the train/eval settings of a composed config."""
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
    images = task.kind == "image"  # image tasks give the model its input shape
    if images != patches:
        fix = "--model vit_tiny" if images else "an image task (shapes, cifar10, mnist, image_folder)"
        raise ConfigError(f"task '{choices['task']}' does not fit model '{choices['model']}'; use {fix}")
    if not images:
        task.check_length(train_cfg.seq_len, "train")
        task.check_length(train_cfg.seq_len, "val")
    torch.manual_seed(seed)
    pe = instantiate(cfg.pe, "pe")
    if not images and pe.max_positions is not None and train_cfg.seq_len > pe.max_positions:
        raise ConfigError(
            f"pe '{config['choices']['pe']}' has a table of {pe.max_positions} positions, shorter than "
            f"train.seq_len={train_cfg.seq_len}; raise pe.max_len or lower train.seq_len"
        )
    if pe.randomized and pe.randomized_max < train_cfg.seq_len:
        raise ConfigError(
            f"pe.randomized_max={pe.randomized_max} is shorter than train.seq_len={train_cfg.seq_len}; "
            "randomized positions are drawn from a range at least as long as the sequence"
        )
    inputs = task.model_kwargs() if images else {"vocab_size": task.vocab_size}
    model = instantiate(cfg.model, "model", pe=pe, **inputs)
    return Setup(config=config, task=task, model=model, train=train_cfg, eval=eval_cfg, seed=seed)
