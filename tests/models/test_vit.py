"""The tiny ViT: permutation invariance without positions, scheme injection, new resolutions."""

import copy

import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.models.vit import ViT
from posenc.pe.alibi2d import ALiBi2D
from posenc.pe.base import PositionOutOfRange
from posenc.pe.learned import LearnedPE
from posenc.pe.learned2d import LearnedPE2D
from posenc.pe.nope import NoPE
from posenc.pe.rel2d import RelativeBias2D
from posenc.pe.resample import resample_grid
from posenc.pe.rope import RoPE
from posenc.pe.rope2d import RoPE2D
from posenc.pe.sincos2d import SinCos2D

D, H = 16, 2


def vit(pe, pool="cls", size=16, init_std=0.02):
    torch.manual_seed(0)
    return ViT(
        pe, num_classes=3, image_size=size, patch_size=4, d_model=D, n_layers=2, n_heads=H, pool=pool, init_std=init_std
    ).eval()


def shuffle_patches(images, perm, p=4):
    """Rearrange the p x p patches of (b, C, H, W) images by a permutation of their raster index."""
    b, c, h, w = images.shape
    patches = images.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, -1, c, p, p)
    patches = patches[:, perm]
    return patches.reshape(b, h // p, w // p, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w)


SCHEMES = {
    "learned": lambda: LearnedPE(D, 17),
    "learned2d": lambda: LearnedPE2D(D, 4),
    "sincos2d": lambda: SinCos2D(D),
    "rel2d": lambda: RelativeBias2D(H, 4),
    "alibi2d": lambda: ALiBi2D(H),
    "rope2d_axial": lambda: RoPE2D(D // H, H),
    "rope2d_mixed": lambda: RoPE2D(D // H, H, mode="mixed"),
}


@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_without_positions_the_pooled_output_ignores_patch_order(pool):
    model = vit(NoPE(ndim=2), pool)
    x = torch.randn(3, 3, 16, 16)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(model(shuffle_patches(x, perm)), model(x), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", SCHEMES)
def test_with_positions_patch_order_matters(name):
    model = vit(SCHEMES[name](), init_std=0.3)
    with torch.no_grad():  # untrained tables are near zero: make them count
        for p in model.pe.parameters():
            p.normal_()
        for b in model.pe.buffers():  # ALiBi's slopes (2^-4, 2^-8 for two heads)
            b.mul_(16)
    x = torch.randn(3, 3, 16, 16)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(1))
    out = model(x)
    assert (model(shuffle_patches(x, perm)) - out).abs().max() > 1e-2 * out.abs().max()


def test_shuffle_patches_helper_moves_patches():
    x = torch.zeros(1, 1, 8, 8)
    x[0, 0, :4, :4] = 1.0  # patch 0
    y = shuffle_patches(x, torch.tensor([3, 1, 2, 0]))
    assert y[0, 0, 4:, 4:].eq(1).all() and y[0, 0, :4, :4].eq(0).all()


@pytest.mark.parametrize("name", SCHEMES)
def test_every_scheme_trains_and_serves_another_resolution(name):
    model = vit(SCHEMES[name]()).train()
    x = torch.randn(2, 3, 16, 16)
    model(x).sum().backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if n.startswith("pe."))
    method = "bicubic" if name in ("learned", "learned2d", "rel2d") else "interpolate"
    moved = copy.deepcopy(model).set_resolution(24, method)
    assert moved(torch.randn(2, 3, 24, 24)).shape == (2, 3)
    assert model.grid == (4, 4) and moved.grid == ((6, 6) if method == "bicubic" else (4, 4))


def test_learned_table_is_cls_row_plus_raster_patches_and_resamples():
    model = vit(LearnedPE(D, 20))
    old = model.pe.table.detach()[:17].clone()
    with pytest.raises(PositionOutOfRange, match="4x4 grid, the images give 6x6"):
        model(torch.randn(1, 3, 24, 24))
    model.set_resolution(24, "bilinear")
    assert model.pe.table.shape == (1 + 36, D)
    torch.testing.assert_close(model.pe.table.detach(), resample_grid(old, 6, mode="bilinear"))
    assert torch.equal(model.pe.table.detach()[0], old[0])  # the cls row is kept apart
    with pytest.raises(ConfigError, match="set pe.max_len=17"):
        vit(LearnedPE(D, 16))


def test_coordinate_schemes_extrapolate_or_interpolate():
    model = vit(RoPE2D(D // H, H))
    assert torch.equal(model.positions((6, 6)), torch.cartesian_prod(torch.arange(6), torch.arange(6)))
    model.set_resolution(24, "interpolate")
    pos = model.positions((6, 6))
    # the new centres on the trained 4x4 grid: (i + 1/2)·4/6 − 1/2
    torch.testing.assert_close(pos[:6, 1], (torch.arange(6) + 0.5) * 4 / 6 - 0.5)
    with pytest.raises(ConfigError, match="method 'bicubic' does not apply .* valid: extrapolate, interpolate"):
        model.set_resolution(24, "bicubic")


def test_bias_leaves_the_cls_token_alone():
    model = vit(RelativeBias2D(H, 4), init_std=0.3)
    with torch.no_grad():
        model.pe.table.fill_(5.0)  # a constant bias on every patch pair changes nothing under softmax...
    x = torch.randn(2, 3, 16, 16)
    out = model(x)
    with torch.no_grad():
        model.pe.table.zero_()
    # ...unless the cls row/column also got it: they do not, so cls attention shifts towards patches
    assert (model(x) - out).abs().max() > 1e-2 * out.abs().max()


def test_bad_inputs():
    with pytest.raises(ConfigError, match="pe 'RoPE' is 1D-only .* use pe=rope2d_axial"):
        vit(RoPE(D // H))
    with pytest.raises(ConfigError, match="task.resolution=18 is not divisible by model.patch_size=4"):
        vit(NoPE(), size=18)
    with pytest.raises(ConfigError, match="image height=18 is not divisible"):
        vit(NoPE())(torch.randn(1, 3, 18, 16))
    with pytest.raises(ConfigError, match="resolution=30 is not divisible"):
        vit(NoPE()).set_resolution(30, "none")


def test_patch_embeddings_are_a_copy_of_the_table():
    model = vit(LearnedPE(D, 17))
    before = model.patch_embeddings()
    torch.testing.assert_close(before, model.pe.table.detach()[1:17])
    with torch.no_grad():
        model.pe.table.add_(1.0)  # as an optimizer step does
    assert not torch.allclose(model.patch_embeddings(), before)


def test_set_resolution_antialias_and_relative_clip():
    model = vit(LearnedPE(D, 17), size=16)
    old = model.pe.table.detach()[:17].clone()
    model.set_resolution(8, "bicubic", antialias=True)
    torch.testing.assert_close(model.pe.table.detach(), resample_grid(old, 2, mode="bicubic", antialias=True))
    rel = vit(RelativeBias2D(H, 4))
    table = rel.pe.table.detach().clone()
    rel.set_resolution(32, "clip")  # offsets clipped: the table and its grid stay
    assert torch.equal(rel.pe.table.detach(), table) and rel.grid == (4, 4)
    assert rel(torch.randn(1, 3, 32, 32)).shape == (1, 3)


def test_attention_backend_is_chosen_when_built():
    assert vit(NoPE()).attention_backend == vit(RoPE2D(D // H, H)).attention_backend == "sdpa"
    assert vit(RelativeBias2D(H, 4)).attention_backend == vit(ALiBi2D(H)).attention_backend == "sdpa_bias"


def test_a_bias_on_the_flex_backend_gives_the_same_logits():
    """'flex' is what CUDA selects; eager flex_attention runs it on the CPU (the cls row unbiased)."""
    model = vit(RelativeBias2D(H, 4))
    with torch.no_grad():
        for p in model.pe.parameters():
            p.normal_()  # a bias large enough to matter
        images = torch.randn(2, 3, 16, 16)
        eager = model(images)
        model.attention_backend = "flex"
        torch.testing.assert_close(model(images), eager, rtol=1e-5, atol=1e-5)
