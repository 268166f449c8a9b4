"""Every option this branch adds composes from the real config tree and instantiates."""

import numpy as np
import pytest
from PIL import Image

from posenc.engine.build import build
from posenc.engine.config import compose, list_options, option_class, options_where
from posenc.models.lm import CausalLM
from posenc.models.vit import ViT
from posenc.pe.grid import fits_patches

SMALL = ["model.d_model=16", "model.n_layers=1", "model.n_heads=2", "model.mlp_hidden=32", "task.val_size=4"]
VIT_SCHEMES = options_where("pe", fits_patches)  # read from the classes: a new 2D option is tested here too


def test_the_vit_schemes_are_the_2d_ones_nope_and_the_learned_table():
    assert set(VIT_SCHEMES) == set(options_where("pe", lambda c: c.ndim == 2)) | {"nope", "learned"}


@pytest.mark.parametrize("pe", VIT_SCHEMES)
def test_every_vit_scheme_builds(pe):
    setup = build(compose(["model=vit_tiny", f"pe={pe}", *SMALL]))
    assert isinstance(setup.model, ViT) and type(setup.model.pe) is option_class("pe", pe)
    assert setup.model.grid == (8, 8) and setup.model.head.out_features == 4


def test_vit_defaults_and_lm_unchanged():
    cfg = compose(["model=vit_tiny"])
    assert (cfg.choices.task, cfg.choices.pe) == ("shapes", "rope2d_axial")
    assert cfg.model.d_model == 64 and cfg.task.resolution == 32 and cfg.model.patch_size == 4
    cfg = compose([])
    assert (cfg.choices.model, cfg.choices.pe, cfg.choices.task) == ("lm_tiny", "rope", "text")
    assert isinstance(build(compose(["model.d_model=16", "model.n_heads=2", "model.n_layers=1"])).model, CausalLM)


def test_new_options_are_listed_with_descriptions():
    for group, names in {
        "model": ["vit_tiny"],
        "pe": list(VIT_SCHEMES),
        "task": ["shapes", "cifar10", "mnist", "image_folder"],
        "experiment": ["resolution", "smoke_vit"],
    }.items():
        options = list_options(group)
        for name in names:
            assert options[name], f"{group}/{name} has no description"


def test_experiments_compose():
    cfg = compose(["experiment=resolution", "pe=learned"])
    assert cfg.choices.model == "vit_tiny" and list(cfg.resolution.resolutions) == [16, 24, 32, 48, 64]
    cfg = compose(["experiment=smoke_vit", "pe=rope2d_mixed"])
    assert cfg.choices.model == "vit_tiny" and cfg.train.steps == 20


def test_image_folder_task_builds_from_files(tmp_path):
    for i, name in enumerate(("a", "b", "c")):
        (tmp_path / name).mkdir()
        for j in range(4):
            Image.fromarray(np.full((9, 7, 3), 60 * i, dtype=np.uint8)).save(tmp_path / name / f"{j}.png")
    setup = build(
        compose(
            [
                "model=vit_tiny",
                "task=image_folder",
                f"task.root={tmp_path}",
                "task.resolution=16",
                "pe=learned2d",
                *SMALL[:-1],
            ]
        )
    )
    assert setup.model.head.out_features == 3 and setup.model.grid == (4, 4)
    assert setup.task.eval_set(setup.task.input_size(setup.train.seq_len))[0].shape[1:] == (3, 16, 16)
