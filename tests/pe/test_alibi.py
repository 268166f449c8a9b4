import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from posenc.pe.alibi import AlibiPE, alibi_slopes

# The paper's slopes (Press et al. 2022, §3 and its reference code): 2^(-8h/n) for n a power of
# two; otherwise the n' = 2^floor(log2 n) slopes, then every other slope of the 2n' sequence.
EXPECTED = {
    8: [2**-h for h in range(1, 9)],
    12: [2**-h for h in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5],
    6: [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3],
    5: [2**-2, 2**-4, 2**-6, 2**-8, 2**-1],
    1: [2**-8],
}


@pytest.mark.parametrize("n_heads", sorted(EXPECTED))
def test_slopes_follow_the_paper(n_heads):
    assert_close(alibi_slopes(n_heads), torch.tensor(EXPECTED[n_heads]), rtol=0, atol=1e-7)


@pytest.mark.parametrize("n_heads", [1, 2, 4, 5, 6, 8, 12, 16, 20, 32])
def test_slopes_equal_bloom(n_heads):
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    alibi = bloom.build_alibi_tensor(torch.ones(1, 3), n_heads, torch.float32)  # (n_h, 1, 3) = m_h * j
    assert_close(alibi_slopes(n_heads), alibi[:, 0, 1], rtol=1e-6, atol=0)  # float32 rounding of theirs


def test_bias_is_minus_slope_times_distance():
    pe = AlibiPE(n_heads=4)
    pos = torch.arange(5)
    bias = pe.bias(pos, pos)
    m = torch.tensor([2**-2, 2**-4, 2**-6, 2**-8])
    expected = -m[:, None, None] * (pos[:, None] - pos[None, :]).abs()
    assert_close(bias, expected)
    assert bias[0, 4].tolist() == [-1.0, -0.75, -0.5, -0.25, 0.0]


def test_causal_relative_form_equals_key_only_form():
    """softmax(s_ij − m(i − j)) = softmax(s_ij + m·(j − c)) over j ≤ i: −m·i + m·c is a row constant."""
    torch.manual_seed(0)
    n_h, s, h_d = 6, 40, 8
    q, k, v = (torch.randn(2, n_h, s, h_d) for _ in range(3))
    pe = AlibiPE(n_heads=n_h)
    pos = torch.arange(s) + 3
    future = torch.ones(s, s, dtype=torch.bool).triu(1)
    relative = pe.bias(pos, pos).masked_fill(future, -math.inf)
    key_only = pe.key_bias(pos)[:, None, :].expand(n_h, s, s).masked_fill(future, -math.inf)  # m·(j − c)
    assert_close(pe.key_bias(pos)[:, 1:] - pe.key_bias(pos)[:, :-1], pe.slopes[:, None].expand(n_h, s - 1))
    out_relative = F.scaled_dot_product_attention(q, k, v, attn_mask=relative)
    out_key_only = F.scaled_dot_product_attention(q, k, v, attn_mask=key_only)
    assert_close(out_relative, out_key_only, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(relative[:, 1:], key_only[:, 1:])  # the masks themselves differ
