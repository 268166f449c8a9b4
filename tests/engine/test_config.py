import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.engine.build import build
from posenc.engine.config import GROUPS, compose, instantiate, list_options

SMALL = [
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.mlp_hidden=48",
    "train.seq_len=16",
    "train.steps=2",
]


def test_every_group_has_options_with_descriptions():
    for group in GROUPS:
        options = list_options(group)
        assert options, group
        assert all(description.strip() for description in options.values()), group


def on_the_vit(group, option):
    """Image tasks and 2D schemes are built with the ViT (their own tests cover the LM's refusal)."""
    from hydra.utils import get_object

    node = compose([f"{group}={option}"])[group]
    target = get_object(node._target_)
    return getattr(target, "input_kind", None) == "patches" or getattr(target, "ndim", 1) == 2


def scored_only(group, option):
    """model=pretrained (and experiment=real, which picks it) is a checkpoint that is scored, not
    built (its class says ``trains = False``): tests/experiments/test_real.py runs it; so is a
    RULER prompt task (task=ruler_vt): tests/experiments/test_real_ruler.py runs those."""
    from posenc.engine.config import target_class

    if group not in ("model", "experiment", "task"):
        return False
    key = "task" if group == "task" else "model"
    return not getattr(target_class(compose([f"{group}={option}"])[key], key), "trains", True)


@pytest.mark.parametrize("group", ["model", "pe", "task", "train", "eval", "experiment"])
def test_every_option_composes_and_builds(group, image_roots):
    for option in list_options(group):
        if scored_only(group, option):
            continue
        overrides = [f"{group}={option}", *SMALL] if group != "experiment" else [f"experiment={option}"]
        if group in ("pe", "task") and on_the_vit(group, option):
            overrides.append("model=vit_tiny")
        if group == "task" and option in image_roots:
            overrides.append(f"task.root={image_roots[option]}")
        cfg = compose(overrides)
        assert cfg.choices[group] == option
        setup = build(cfg)
        if setup.task.input_kind == "patches":
            x = torch.rand(2, setup.task.in_channels, setup.task.resolution, setup.task.resolution)
            assert setup.model(x).shape == (2, setup.task.num_classes)
            continue
        x = torch.randint(0, setup.task.vocab_size, (2, 8))
        assert setup.model(x).shape == (2, 8, setup.task.vocab_size)


def test_interpolations_follow_the_model():
    cfg = compose(["pe=rope", "model.d_model=96", "model.n_heads=3"])
    assert cfg.pe.head_dim == 32
    cfg = compose(["pe=learned", "train.seq_len=77"])
    assert cfg.pe.max_len == 77


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["pe=foo"], "unknown pe 'foo'; valid: .*nope.*rope"),
        (["model=foo"], "unknown model 'foo'; valid: .*lm_tiny"),
        (["task=foo"], "unknown task 'foo'; valid: .*text"),
        (["train.foo=1"], "unknown override key 'train.foo'; valid keys in train: steps"),
        # the keys of the option picked, not of the default one (text's: path, source, …)
        (["task=ruler_niah_multivalue", "task.depths=[0.5]"], "valid keys in task: haystack, values, key_kind"),
        (["+pe.foo=1"], "unknown key 'pe.foo'; valid keys: head_dim"),
        (["train.lr=abc"], "train.lr: expected float, got 'abc'"),
        (["train.steps=1.5"], "train.steps: expected int, got 1.5"),
        (["model.tie_embeddings=maybe"], "model.tie_embeddings: expected bool"),
        (["pe.layout=diagonal"], "pe.layout: 'diagonal' is not one of 'half', 'interleaved'"),
        (["model.d_model=102"], "102 is not divisible by 4"),
        (["model.d_model=36", "model.n_heads=4"], "even rotary dimension"),
        (["pe=learned", "pe.max_len=8"], "table of 8 positions, shorter than train.seq_len=128"),
        (["train.seq_len=100000000"], "longer than the train split"),
        (["train.warmup_steps=-1"], "train.warmup_steps must be >= 0"),
        (["train.device=tpu"], "train.device 'tpu' is not a device"),
        (["seed=abc"], "seed: expected an integer"),
        (["train.lr="], "train.lr: expected float, got ''"),
    ],
)
def test_mistakes_are_one_line_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        build(compose(overrides))
    assert "\n" not in str(info.value)


def test_instantiate_checks_injected_arguments():
    cfg = compose([])
    with pytest.raises(ConfigError, match="model.pe: expected PositionScheme"):
        instantiate(cfg.model, "model", pe="rope", vocab_size=10)
