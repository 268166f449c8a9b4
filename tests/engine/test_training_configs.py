"""The train options that are variants of ``default`` inherit it and state only what differs;
composed, they give exactly the values each stated in full before."""

import pytest
from omegaconf import OmegaConf

from posenc.engine.config import compose, instantiate, option_node
from posenc.engine.training import TrainConfig

COMMON = {
    "_target_": "posenc.engine.training.TrainConfig",
    "lr": 0.003,
    "min_lr_ratio": 0.1,
    "weight_decay": 0.1,
    "pe_lr_scale": 1.0,
    "beta1": 0.9,
    "beta2": 0.95,
    "grad_clip": 1.0,
    "device": "auto",
    "precision": "fp32",
    "compile": False,
    "target_accuracy": 0.95,
    "target_bpb": None,
}
# each option's values as its YAML stated them in full, before it inherited default
BEFORE = {
    "passkey": {
        "description": "passkey at 32 tokens, to 0.95 answer accuracy (checked every 50 steps) or 3000 steps "
        "of 32 sequences",
        **COMMON,
        "steps": 3000,
        "batch_size": 32,
        "seq_len": 32,
        "warmup_steps": 25,
        "log_every": 50,
        "eval_every": 50,
        "checkpoint_every": 500,
    },
    "order": {
        "description": "order task training (posenc order): to 0.95 accuracy (checked every 20 steps) or 200 "
        "steps of 64 x 16 tokens",
        **COMMON,
        "steps": 200,
        "batch_size": 64,
        "seq_len": 16,
        "warmup_steps": 30,
        "log_every": 10,
        "eval_every": 20,
        "checkpoint_every": 1000000,
    },
}


@pytest.mark.parametrize("name", list(BEFORE))
def test_a_variant_composes_to_the_values_it_stated_in_full(name):
    cfg = compose([f"train={name}"])
    assert OmegaConf.to_container(cfg.train, resolve=True) == BEFORE[name]
    assert isinstance(instantiate(cfg.train, "train"), TrainConfig)


@pytest.mark.parametrize("name", list(BEFORE))
def test_a_variant_states_only_what_differs_from_default(name):
    node, default = option_node("train", name), option_node("train", "default")
    assert node["defaults"] == ["default", "_self_"]
    own = {k: v for k, v in node.items() if k != "defaults"}
    assert own and all(default.get(k) != v for k, v in own.items()), own
