"""Scales: which schemes they apply to, and what they do to a trained scheme."""

import math

import pytest
import torch

from posenc.models.lm import CausalLM
from posenc.pe.learned import LearnedPE
from posenc.pe.nope import NoPE
from posenc.pe.resample import resample_table
from posenc.pe.rope import RoPE
from posenc.pe.scaling import PI, NoScale, TableClamp, TableInterpolate, YaRN
from posenc.pe.sinusoidal import SinusoidalPE


def test_each_scale_applies_to_its_schemes_only():
    rope, learned, others = RoPE(head_dim=8), LearnedPE(dim=8, max_len=4), [NoPE(), SinusoidalPE(dim=8)]
    assert all(NoScale.applies(pe) for pe in [rope, learned, *others])
    assert PI.applies(rope) and YaRN.applies(rope) and not any(PI.applies(pe) for pe in [learned, *others])
    assert TableClamp.applies(learned) and TableInterpolate.applies(learned)
    assert not any(TableClamp.applies(pe) for pe in [rope, *others])


def test_table_resampling():
    table = torch.arange(8.0).view(4, 2)  # rows (0,1) (2,3) (4,5) (6,7)
    assert torch.equal(resample_table(table, 6, "clamp")[4:], torch.tensor([[6.0, 7.0], [6.0, 7.0]]))
    assert resample_table(table, 3, "clamp") is table
    # row m of the new table reads the old one at m * 4/8: halfway rows are averages
    expected = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [6, 7]], dtype=torch.float32)
    torch.testing.assert_close(resample_table(table, 8, "linear"), expected)
    assert resample_table(table, 4, "linear") is table


def test_table_scales_let_a_learned_model_run_past_its_table():
    torch.manual_seed(0)
    model = CausalLM(LearnedPE(dim=16, max_len=8), vocab_size=11, d_model=16, n_layers=1, n_heads=2)
    idx = torch.randint(0, 11, (1, 16))
    short = model(idx[:, :8])
    TableInterpolate().apply(model.pe, 16)
    assert model.pe.table.shape == (16, 16) and model.pe.max_positions == 16
    assert model(idx).shape == (1, 16, 11)
    TableClamp().apply(model.pe, 4)  # shorter: unchanged
    assert model.pe.table.shape == (16, 16)
    torch.testing.assert_close(model(idx[:, :1]), short[:, :1])  # row 0 is kept


def test_pi_on_frequencies_equals_interpolated_positions():
    """Scaling the frequencies by 1/s is the same model as feeding positions m/s."""
    torch.manual_seed(0)
    model = CausalLM(RoPE(head_dim=8), vocab_size=11, d_model=16, n_layers=2, n_heads=2)
    idx = torch.randint(0, 11, (2, 24))
    reference = model(idx, torch.arange(24) / 3.0)
    PI(factor=3.0).apply(model.pe, 24)
    torch.testing.assert_close(model(idx), reference, rtol=1e-5, atol=1e-5)


def test_yarn_attention_factor_scales_the_rotated_queries_and_keys():
    rope = RoPE(head_dim=8)
    YaRN(factor=4.0, beta_fast=1e9, beta_slow=1e9).apply(rope, 32)  # no ramp: every dim extrapolated
    q = torch.randn(1, 1, 5, 8)
    plain = RoPE(head_dim=8)
    rq, _ = rope.rotate_qk(q, q, rope.rotation(torch.arange(5), torch.float32))
    pq, _ = plain.rotate_qk(q, q, plain.rotation(torch.arange(5), torch.float32))
    torch.testing.assert_close(rq, pq * (0.1 * torch.log(torch.tensor(4.0)) + 1))


def test_rotary_scales_apply_through_the_protocol_not_a_class():
    """A scheme of one's own that rotates by θ_i and implements ``Rotary`` is rescaled like RoPE."""
    from posenc.pe.base import PositionScheme
    from posenc.pe.rope import Rotary, rope_inv_freq
    from posenc.pe.scaling import NTK

    class Mine(PositionScheme):
        rotates_qk = True

        def __init__(self):
            super().__init__()
            self.rot_dim, self.base, self.attention_scaling = 8, 100.0, 1.0
            self.inv_freq = rope_inv_freq(8, 100.0)

        def set_frequencies(self, inv_freq, attention_scaling=1.0):
            self.inv_freq, self.attention_scaling = inv_freq, attention_scaling

    pe = Mine()
    assert isinstance(pe, Rotary) and PI.applies(pe) and not TableClamp.applies(pe)
    NTK(factor=2.0).apply(pe, 16)
    torch.testing.assert_close(pe.inv_freq, rope_inv_freq(8, 100.0 * 2.0 ** (8 / 6)))
    YaRN(factor=4.0, beta_fast=1e9, beta_slow=1e9).apply(pe, 16)
    assert pe.attention_scaling == 0.1 * math.log(4.0) + 1


def test_table_scales_ask_the_table_to_resample_itself():
    torch.manual_seed(0)
    pe, reference = LearnedPE(dim=4, max_len=6), LearnedPE(dim=4, max_len=6)
    reference.table.data.copy_(pe.table.data)
    TableInterpolate().apply(pe, 15)
    reference.resample_(15, "linear")
    assert torch.equal(pe.table, reference.table) and pe.max_positions == reference.max_positions == 15
    TableClamp().apply(pe, 20)
    assert torch.equal(pe.table[15:], pe.table[14:15].expand(5, 4))


BASE = {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5}


def test_each_scale_writes_its_hugging_face_rope_parameters():
    """Frozen: what each scale writes into a default-RoPE config (r = 8, 48 tokens), and the
    ``max_position_embeddings`` beside it; none writes nothing."""
    from posenc.pe.scaling import NTK, DynamicNTK, Llama3, LongRoPE

    kept = {"partial_rotary_factor": 0.5, "rope_theta": 500.0}
    assert NoScale().hf_rope_parameters(BASE, 8, 48) is None
    assert PI(factor=3.0, original_length=16).hf_rope_parameters(BASE, 8, 48) == (
        {**kept, "rope_type": "linear", "factor": 3.0},
        16,
    )
    assert PI(original_length=16).hf_rope_parameters(BASE, 8, 48)[0]["factor"] == 3.0  # s from the length
    ntk, max_pos = NTK(factor=3.0, original_length=16).hf_rope_parameters(BASE, 8, 48)
    assert (
        ntk == {**kept, "rope_type": "default", "rope_theta": pytest.approx(500.0 * 3.0 ** (8 / 6))} and max_pos == 48
    )
    assert DynamicNTK(original_length=16).hf_rope_parameters(BASE, 8, 48) == (
        {**kept, "rope_type": "dynamic", "factor": 1.0},
        16,
    )
    yarn = {"beta_fast": 16.0, "beta_slow": 1.0, "truncate": True, "original_max_position_embeddings": 16}
    assert YaRN(factor=3.0, original_length=16, beta_fast=16.0).hf_rope_parameters(BASE, 8, 48) == (
        {**kept, "rope_type": "yarn", "factor": 3.0, **yarn},
        48,
    )
    llama3 = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    assert Llama3(factor=4.0, original_length=16).hf_rope_parameters(BASE, 8, 48) == (
        {**kept, "rope_type": "llama3", "factor": 4.0, **llama3},
        64,
    )
    short, long = [1.0, 1.1, 1.2, 1.3], [1.0, 2.0, 3.0, 4.0]
    longrope = LongRoPE(original_length=16, max_position=64, short_factor=short, long_factor=long)
    assert longrope.hf_rope_parameters(BASE, 8, 48) == (  # max_position is max_position_embeddings
        {**kept, "rope_type": "longrope", "factor": 4.0, "short_factor": short, "long_factor": long}
        | {"original_max_position_embeddings": 16},
        64,
    )


def test_scales_refuse_what_one_hugging_face_config_cannot_say():
    from posenc.core.errors import ConfigError
    from posenc.pe.scaling import NTK

    linear = {"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}
    assert PI(factor=1.5).hf_rope_parameters(linear, 8, 48) == (  # stacked: one linear factor
        {"rope_type": "linear", "rope_theta": 500.0, "factor": 3.0},
        48,
    )
    for scale in (NTK(factor=2.0), YaRN(factor=2.0)):
        with pytest.raises(ConfigError, match=f"cannot describe '{type(scale).__name__}' on top of the shipped"):
            scale.hf_rope_parameters(linear, 8, 48)
    with pytest.raises(ConfigError, match="scale 'TableClamp' has no Hugging Face rope_type"):
        TableClamp().hf_rope_parameters(BASE, 8, 48)


def test_a_rotary_scale_without_a_rope_type_says_so():
    from dataclasses import dataclass

    from posenc.core.errors import ConfigError
    from posenc.pe.scaling import RopeScale

    @dataclass
    class Mine(RopeScale):
        pass

    with pytest.raises(ConfigError, match="scale 'Mine' has no Hugging Face rope_type"):
        Mine(factor=2.0).hf_rope_parameters(BASE, 8, 48)


def test_every_scale_option_that_rescales_rope_rescales_xpos():
    """``scale=pi|ntk|yarn|…`` applies to ``pe=xpos`` as to ``pe=rope``: the same options, read from configs/scale."""
    from posenc.engine.config import list_options, option_class
    from posenc.pe.xpos import XPos

    options = list_options("scale")
    for_rope = {n for n in options if option_class("scale", n).applies(RoPE(head_dim=8))}
    for_xpos = {n for n in options if option_class("scale", n).applies(XPos(head_dim=8))}
    assert for_xpos == for_rope >= {"none", "pi", "ntk", "dynamic", "yarn", "llama3", "longrope"}
    assert "clamp" not in for_xpos
