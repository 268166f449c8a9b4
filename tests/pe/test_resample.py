"""resample_grid against torchvision's interpolate_embeddings and F.interpolate."""

from collections import OrderedDict

import pytest
import torch
import torch.nn.functional as F
from torchvision.models.vision_transformer import interpolate_embeddings

from posenc.core.errors import ConfigError
from posenc.pe.resample import resample_grid


def table(h, w, d=6, prefix=1, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, prefix + h * w, d, generator=g).to(dtype)


@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
@pytest.mark.parametrize("new", [12, 5])
def test_matches_torchvision_interpolate_embeddings(mode, new):
    pos = table(8, 8)
    state = OrderedDict({"encoder.pos_embedding": pos.clone()})
    ref = interpolate_embeddings(image_size=new * 16, patch_size=16, model_state=state, interpolation_mode=mode)
    ours = resample_grid(pos, new, mode=mode, align_corners=True, antialias=False)  # torchvision never antialiases
    assert ours.shape == (1, 1 + new * new, 6)
    torch.testing.assert_close(ours, ref["encoder.pos_embedding"], rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "mode,antialias",
    [
        ("nearest", False),
        ("bilinear", False),
        ("bicubic", False),
        ("area", False),
        ("bilinear", True),
        ("bicubic", True),
    ],
)
def test_matches_f_interpolate_on_non_square_grids(mode, antialias):
    h, w, nh, nw = 4, 6, 3, 9
    pos = table(h, w, prefix=2)
    ours = resample_grid(pos, (nh, nw), old_grid=(h, w), num_prefix_tokens=2, mode=mode, antialias=antialias)
    img = pos[:, 2:].reshape(1, h, w, 6).permute(0, 3, 1, 2)
    extra = {"antialias": antialias, "align_corners": False} if mode in ("bilinear", "bicubic") else {}
    ref = F.interpolate(img, size=(nh, nw), mode=mode, **extra).permute(0, 2, 3, 1).reshape(1, nh * nw, 6)
    torch.testing.assert_close(ours[:, 2:], ref, rtol=0, atol=0)
    # without the batch dimension: the same rows
    torch.testing.assert_close(
        resample_grid(pos[0], (nh, nw), old_grid=(h, w), num_prefix_tokens=2, mode=mode, antialias=antialias), ours[0]
    )


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("new", [(4, 4), (3, 5), (12, 12)])
def test_default_antialiases_smooth_modes_as_timm(mode, new):
    """Fails on the old behaviour (antialias=False by default): timm's ``resample_abs_pos_embed``
    antialiases by default, which matters when a table is shrunk (8 -> 4: up to 1.4 on a unit-std
    table); checked against timm when it is installed, else against F.interpolate(antialias=True)."""
    pos = table(8, 8, d=16)
    ours = resample_grid(pos, new, mode=mode)
    img = pos[:, 1:].reshape(1, 8, 8, 16).permute(0, 3, 1, 2)  # (1, D, H, W)
    ref = F.interpolate(img, size=new, mode=mode, antialias=True).permute(0, 2, 3, 1).reshape(1, -1, 16)
    torch.testing.assert_close(ours, torch.cat((pos[:, :1], ref), dim=1), rtol=0, atol=0)
    if new == (4, 4):
        plain = resample_grid(pos, new, mode=mode, antialias=False)
        assert float((ours - plain).abs().max()) > 0.5  # downsampling: antialiasing changes the table
    try:
        from timm.layers import resample_abs_pos_embed
    except ImportError:
        return
    torch.testing.assert_close(ours, resample_abs_pos_embed(pos, list(new), interpolation=mode), rtol=0, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "area"])
def test_modes_without_an_antialiased_form_ignore_the_default(mode):
    pos = table(8, 8)
    img = pos[:, 1:].reshape(1, 8, 8, 6).permute(0, 3, 1, 2)
    ref = F.interpolate(img, size=(4, 4), mode=mode).permute(0, 2, 3, 1).reshape(1, 16, 6)
    torch.testing.assert_close(resample_grid(pos, 4, mode=mode)[:, 1:], ref, rtol=0, atol=0)


def test_same_grid_is_identity_and_prefix_rows_untouched():
    pos = table(5, 7, prefix=3)
    assert torch.equal(resample_grid(pos, (5, 7), old_grid=(5, 7), num_prefix_tokens=3), pos)
    up = resample_grid(pos, (9, 4), old_grid=(5, 7), num_prefix_tokens=3, mode="bilinear")
    assert torch.equal(up[:, :3], pos[:, :3])
    assert up.shape == (1, 3 + 36, 6)


def test_float32_inside_and_dtype_kept():
    pos = table(4, 4, dtype=torch.bfloat16)
    out = resample_grid(pos, 6, mode="bicubic")
    assert out.dtype == torch.bfloat16
    ref = resample_grid(pos.float(), 6, mode="bicubic").to(torch.bfloat16)
    assert torch.equal(out, ref)


def test_bad_inputs():
    pos = table(4, 4)
    with pytest.raises(
        ConfigError, match="unknown interpolation mode 'cubic'; valid: nearest, bilinear, bicubic, area"
    ):
        resample_grid(pos, 6, mode="cubic")
    with pytest.raises(ConfigError, match="antialias needs mode bilinear or bicubic"):
        resample_grid(pos, 2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="not a square grid"):
        resample_grid(table(2, 3), 4)
    with pytest.raises(ValueError, match="needs 6 patch rows"):
        resample_grid(pos, 4, old_grid=(2, 3))
