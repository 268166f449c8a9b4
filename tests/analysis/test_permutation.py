import pytest
import torch
from tiny_models import TinyViT

from posenc.analysis.permutation import permutation_test, permute_inputs, permute_patches
from posenc.models.lm import CausalLM
from posenc.pe.learned import LearnedPE
from posenc.pe.nope import NoPE
from posenc.pe.rope import RoPE


def lm(pe, causal):
    torch.manual_seed(0)
    return CausalLM(pe, vocab_size=20, d_model=32, n_layers=2, n_heads=2, mlp_hidden=64, causal=causal, init_std=0.3)


def tokens():
    return torch.randint(0, 20, (16, 10), generator=torch.Generator().manual_seed(1))


def test_bidirectional_nope_is_permutation_equivariant_to_float_rounding():
    s = permutation_test(lm(NoPE(), causal=False), tokens(), 4, torch.Generator().manual_seed(0))
    assert s.equivariance_residual < 1e-6
    assert s.pooled_max_abs_delta < 1e-5 and s.pooled_pred_changed == 0 and s.token_pred_changed == 0


@pytest.mark.parametrize("pe, causal", [(NoPE(), True), (RoPE(16), False), (RoPE(16), True)])
def test_a_causal_mask_or_a_position_scheme_breaks_invariance(pe, causal):
    s = permutation_test(lm(pe, causal), tokens(), 4, torch.Generator().manual_seed(0))
    assert s.equivariance_residual > 1e-3 and s.pooled_max_abs_delta > 1e-4


def test_learned_table_breaks_invariance():
    torch.manual_seed(0)
    s = permutation_test(
        lm(LearnedPE(32, 10, init_std=0.5), causal=False), tokens(), 4, torch.Generator().manual_seed(0)
    )
    assert s.equivariance_residual > 1e-2


def test_permute_patches_moves_whole_patches_in_raster_order():
    # a 2x3 grid of 2x2 patches, each filled with its own index
    idx = torch.arange(6).view(2, 3).repeat_interleave(2, 0).repeat_interleave(2, 1).float()
    images = idx[None, None].expand(1, 3, 4, 6)
    perm = torch.tensor([5, 0, 3, 1, 4, 2])
    out = permute_patches(images, perm, 2)
    got = out[0, :, ::2, ::2].reshape(3, 6)  # one pixel per patch, every channel
    assert torch.equal(got, perm.float().expand(3, 6))
    assert torch.equal(permute_patches(out, perm.argsort(), (2, 2)), images)


def test_classifier_path_reads_tokens_from_the_last_block_and_drops_the_cls_row():
    images = torch.randn(8, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    nope = permutation_test(TinyViT(NoPE(ndim=2)), images, 3, torch.Generator().manual_seed(0))
    assert nope.equivariance_residual < 1e-6 and nope.pooled_max_abs_delta < 1e-5
    learned = permutation_test(TinyViT(LearnedPE(16, 16, init_std=1.0)), images, 3, torch.Generator().manual_seed(0))
    assert learned.equivariance_residual > 1e-2 and learned.pooled_max_abs_delta > 1e-3


def test_permute_inputs_on_token_ids():
    x = torch.arange(12).view(2, 6)
    perm = torch.tensor([2, 0, 1, 5, 4, 3])
    assert torch.equal(permute_inputs(None, x, perm)[0], torch.tensor([2, 0, 1, 5, 4, 3]))


def test_zero_permutations_is_refused():
    with pytest.raises(ValueError):
        permutation_test(lm(NoPE(), False), tokens(), 0, torch.Generator())
