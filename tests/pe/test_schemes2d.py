"""learned2d, sincos2d, rel2d, alibi2d and the patch-grid helpers, against exact numbers."""

import math

import pytest
import torch

from posenc.core.errors import ConfigError
from posenc.engine.config import list_options, option_class
from posenc.pe.alibi2d import ALiBi2D, alibi_slopes
from posenc.pe.base import PositionOutOfRange
from posenc.pe.grid import check_scheme_fits, interpolated_positions, patch_positions
from posenc.pe.learned2d import LearnedPE2D
from posenc.pe.rel2d import RelativeBias2D
from posenc.pe.resample import resample_grid
from posenc.pe.sincos2d import SinCos2D


def test_patch_positions_raster_and_interpolated_centres():
    assert patch_positions((2, 3)).tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    torch.testing.assert_close(interpolated_positions((4, 4), (4, 4)), patch_positions(4).float())
    # 2 -> 4: centres 0.5 and 1.5 of the new grid's units land on 0.5·2 − 0.5 ... of the old
    pos = interpolated_positions((4, 2), (2, 2))
    assert pos[:, 0].unique().tolist() == [-0.25, 0.25, 0.75, 1.25]
    assert pos[:, 1].unique().tolist() == [0.0, 1.0]


def test_sincos2d_exact_values_and_relative_dot_products():
    pe = SinCos2D(dim=8)
    emb = pe.embedding(torch.tensor([[1, 2]])).double()[0]  # row 1, col 2
    col = [math.sin(2), math.sin(0.02), math.cos(2), math.cos(0.02)]
    row = [math.sin(1), math.sin(0.01), math.cos(1), math.cos(0.01)]
    torch.testing.assert_close(emb, torch.tensor(col + row, dtype=torch.float64), rtol=0, atol=1e-6)
    pe = SinCos2D(dim=16)
    pos = patch_positions(5)
    e = pe.embedding(pos).double()
    e2 = pe.embedding(pos + torch.tensor([3, 1])).double()
    torch.testing.assert_close(e @ e.T, e2 @ e2.T, rtol=0, atol=1e-5)
    with pytest.raises(ConfigError, match="divisible by 4"):
        SinCos2D(dim=6)


def test_learned2d_concatenates_half_width_column_and_row_tables_by_default():
    """Fails on the old behaviour, which summed two full-width tables: the ViT paper (App. D.4)
    concatenates an X and a Y embedding of D/2 each, so the first half of a patch's embedding
    depends on its column only and the second half on its row only."""
    torch.manual_seed(0)
    pe = LearnedPE2D(dim=6, grid=3)
    assert pe.combine == "concat" and pe.rows.shape == pe.cols.shape == (3, 3)
    pos = torch.tensor([[2, 1], [0, 2]])  # (row, col)
    torch.testing.assert_close(
        pe.embedding(pos), torch.stack((torch.cat((pe.cols[1], pe.rows[2])), torch.cat((pe.cols[2], pe.rows[0]))))
    )
    e = pe.embedding(patch_positions(3)).reshape(3, 3, 6)  # (row, col, d)
    assert torch.equal(e[0, :, :3], e[2, :, :3]) and torch.equal(e[:, 0, 3:], e[:, 2, 3:])


def test_learned2d_sums_full_width_tables_on_request_and_resamples():
    torch.manual_seed(0)
    pe = LearnedPE2D(dim=4, grid=3, combine="sum")
    assert pe.rows.shape == pe.cols.shape == (3, 4)
    pos = torch.tensor([[2, 1], [0, 2]])
    torch.testing.assert_close(pe.embedding(pos), torch.stack((pe.rows[2] + pe.cols[1], pe.rows[0] + pe.cols[2])))
    with pytest.raises(PositionOutOfRange, match="past the learned2d grid 3x3"):
        pe.embedding(torch.tensor([[3, 0]]))
    rows = pe.rows.detach().clone()
    pe.resample_((5, 2), mode="bilinear")
    assert pe.grid == (5, 2)
    torch.testing.assert_close(
        pe.rows.detach(), resample_grid(rows, (5, 1), old_grid=(3, 1), num_prefix_tokens=0, mode="bilinear")
    )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"combine": "mean"}, "pe.combine 'mean' .*valid: concat, sum"),
        ({"dim": 5}, "pe.combine=concat needs an even width .* got 5"),
    ],
)
def test_learned2d_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        LearnedPE2D(**{"dim": 4, "grid": 3, **kwargs})


@pytest.mark.parametrize("combine,width", [("concat", 8), ("sum", 16)])
def test_learned2d_combine_is_a_config_key(combine, width):
    from posenc.engine.build import build
    from posenc.engine.config import compose

    overrides = ["model=vit_tiny", "pe=learned2d", "model.d_model=16", "model.n_heads=2", "model.n_layers=1"]
    pe = build(compose([*overrides, *([] if combine == "concat" else ["pe.combine=sum"])])).model.pe
    assert pe.combine == combine and pe.rows.shape == (8, width)


def test_rel2d_bias_reads_the_offset_table_and_clips():
    torch.manual_seed(0)
    pe = RelativeBias2D(n_heads=2, grid=3)
    pos = patch_positions(3)
    bias = pe.bias(pos, pos)  # (2, 9, 9)
    assert bias.shape == (2, 9, 9)
    # patch (0,0) vs (2,1): offset (−2, −1) -> table[:, 0, 1]
    torch.testing.assert_close(bias[:, 0, 7], pe.table[:, 0, 1])
    torch.testing.assert_close(bias[:, 4, 4], pe.table[:, 2, 2])  # zero offset: the centre
    # a bigger grid clips offsets to ±2
    big = patch_positions(5)
    b5 = pe.bias(big, big)
    torch.testing.assert_close(b5[:, 0, 24], pe.table[:, 0, 0])  # offset (−4, −4) clipped to (−2, −2)
    # translation invariance within the table
    torch.testing.assert_close(pe.bias(pos + 7, pos + 7), bias)


def test_rel2d_resample_to_a_new_grid():
    torch.manual_seed(0)
    pe = RelativeBias2D(n_heads=3, grid=4)
    old = pe.table.detach().clone()
    pe.resample_((4, 4))
    assert torch.equal(pe.table.detach(), old)  # same grid: identity
    pe.resample_((6, 5), mode="bicubic")
    assert pe.table.shape == (3, 11, 9) and pe.grid == (6, 5)
    # antialiased by default, as timm's resample_relative_position_bias_table
    ref = torch.nn.functional.interpolate(old[None], size=(11, 9), mode="bicubic", align_corners=False, antialias=True)[
        0
    ]
    torch.testing.assert_close(pe.table.detach(), ref, rtol=0, atol=1e-6)


def test_alibi2d_slopes_and_distance_bias():
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2**-2, 2**-4, 2**-6, 2**-8]))
    torch.testing.assert_close(alibi_slopes(6), torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]))
    pe = ALiBi2D(n_heads=4)
    pos = torch.tensor([[0, 0], [3, 4]])
    bias = pe.bias(pos, pos)
    torch.testing.assert_close(bias[:, 0, 1], -5 * alibi_slopes(4))
    torch.testing.assert_close(bias[:, 1, 1], torch.zeros(4))
    batched = pe.bias(pos[None].expand(2, 2, 2), pos[None].expand(2, 2, 2))
    assert batched.shape == (2, 4, 2, 2)


def test_scheme_names_that_do_not_fit_name_the_counterpart():
    with pytest.raises(ConfigError, match="pe 'rope' is 1D-only .* use pe=rope2d_axial"):
        check_scheme_fits(option_class("pe", "rope"), "rope", patches=True)
    with pytest.raises(ConfigError, match="use pe=rel2d"):
        check_scheme_fits(option_class("pe", "t5"), "t5", patches=True)
    with pytest.raises(ConfigError, match="pe 'alibi2d' is a 2D scheme .* use pe=alibi"):
        check_scheme_fits(option_class("pe", "alibi2d"), "alibi2d", patches=False)
    check_scheme_fits(option_class("pe", "learned"), "learned", patches=True)
    check_scheme_fits(option_class("pe", "nope"), "nope", patches=False)


def test_every_option_fits_one_model_and_its_counterpart_the_other():
    """Read from the classes: a 2D option fits only the ViT, and the counterpart a 1D option names
    fits the ViT (no table of names to keep in step)."""
    for name in list_options("pe"):
        cls = option_class("pe", name)
        if cls.ndim == 2:
            with pytest.raises(ConfigError):
                check_scheme_fits(cls, name, patches=False)
        else:
            check_scheme_fits(cls, name, patches=False)
            check_scheme_fits(option_class("pe", cls.counterpart), cls.counterpart, patches=True)
