"""build: the task and the model fit by their declared facts, and the run's device is chosen once."""

import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.engine.build import build, model_reads
from posenc.engine.config import compose, list_options, option_class

SMALL = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.mlp_hidden=64"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["task=shapes"],
            "task 'shapes' does not fit model 'lm_tiny'; use --model vit_tiny (it reads patches), or a task that "
            "gives tokens ({tokens})",
        ),
        (
            ["model=vit_tiny", "task=text"],
            "task 'text' does not fit model 'vit_tiny'; use --model lm_tiny (it reads tokens), or a task that "
            "gives patches (cifar10, image_folder, mnist, shapes)",
        ),
    ],
)
def test_a_task_that_gives_what_the_model_does_not_read_names_both_fixes(overrides, message):
    # every task option whose class gives tokens, read from the tree (new tasks join the list)
    tokens = [t for t in list_options("task") if option_class("task", t).input_kind == "tokens"]
    assert {"text", "passkey", "copy"} <= set(tokens) and "shapes" not in tokens
    with pytest.raises(ConfigError) as e:
        build(compose([*overrides, *SMALL]))
    assert str(e.value) == message.format(tokens=", ".join(sorted(tokens)))


def test_the_model_reads_what_its_class_declares():
    from posenc.models.vit import ViT

    assert model_reads(option_class("model", "lm_tiny")) == "tokens" and model_reads(ViT) == "patches"


def test_the_device_is_the_contexts_unless_the_config_names_one():
    setup = build(compose(["experiment=smoke"]))
    assert setup.train.device == "auto"
    assert setup.place(torch.device("cpu")) == torch.device("cpu") and setup.train.device == "cpu"
    named = build(compose(["experiment=smoke", "train.device=cpu"]))
    assert named.place(torch.device("meta")) == torch.device("cpu")  # the config's device wins
