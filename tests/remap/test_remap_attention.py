"""Each remap's chunked attention against the explicit (s, s) construction of its paper
(tests/remap/remap_reference.py), at chunk sizes that divide s and ones that do not."""

from __future__ import annotations

import pytest
import torch
from remap_reference import pair_positions, reference_attention

from posenc.pe.remap.base import band_pieces
from posenc.pe.remap.dual_chunk import DualChunk
from posenc.pe.remap.rerope import LeakyReRoPE, ReRoPE
from posenc.pe.remap.self_extend import SelfExtend
from posenc.pe.remap.sinks import AttentionSinks
from posenc.pe.rope import RoPE
from posenc.pe.scaling import YaRN

S = 23
REMAPS = {
    "self_extend": SelfExtend(group=3, window=5, original_length=16),
    "self_extend_g1": SelfExtend(group=1, window=4, original_length=16),
    "self_extend_w1": SelfExtend(group=4, window=1, original_length=16),
    "rerope": ReRoPE(window=4, original_length=16),
    "leaky_rerope": LeakyReRoPE(window=4, k=2.5, original_length=16),
    "sinks": AttentionSinks(n_sink=2, window=5, original_length=16),
    "sinks_none": AttentionSinks(n_sink=0, window=6, original_length=16),
    "dual_chunk": DualChunk(chunk_size=7, local_window=2, original_length=16),
    "dual_chunk_w0": DualChunk(chunk_size=4, local_window=0, original_length=16),
}


def qkv(n_h: int = 4, n_kv: int = 2, h_d: int = 16, b: int = 2):
    g = torch.Generator().manual_seed(1)
    return (
        torch.randn(b, n_h, S, h_d, generator=g),
        torch.randn(b, n_kv, S, h_d, generator=g),
        torch.randn(b, n_kv, S, h_d, generator=g),
    )


@pytest.mark.parametrize("name", REMAPS)
@pytest.mark.parametrize("chunk,tile", [(1, None), (4, 3), (5, 1), (7, 4), (S, 6), (S, None)])
def test_chunked_equals_reference(name, chunk, tile):
    """Blocks of ``chunk`` queries against tiles of ``tile`` keys (None: one tile a piece here)."""
    remap, pe = REMAPS[name], RoPE(16)
    q, k, v = qkv()
    got = remap.prepare(pe, torch.arange(S), q.dtype, chunk, tile).attend(q, k, v)
    torch.testing.assert_close(got, reference_attention(remap, pe, q, k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["self_extend", "leaky_rerope", "sinks", "dual_chunk"])
def test_composes_with_a_frequency_scaling(name):
    """Under YaRN's frequencies and attention factor the chunked attention still equals the construction."""
    remap = REMAPS[name]
    q, k, v = qkv()
    yarn = RoPE(16)
    YaRN(factor=4.0, original_length=8).apply(yarn, 32)
    assert yarn.attention_scaling > 1
    got = remap.prepare(yarn, torch.arange(S), q.dtype, 6).attend(q, k, v)
    torch.testing.assert_close(got, reference_attention(remap, yarn, q, k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", REMAPS)
def test_remap_changes_attention(name):
    """Every remap differs from plain causal RoPE attention (so agreement is not trivial), but
    Self-Extend with G = 1, whose grouped positions are the exact ones."""
    remap, pe = REMAPS[name], RoPE(16)
    q, k, v = qkv()
    rq, rk = pe.rotate_qk(q, k, pe.rotation(torch.arange(S), q.dtype))
    plain = torch.nn.functional.scaled_dot_product_attention(rq, rk, v, is_causal=True, enable_gqa=True)
    gap = (remap.prepare(pe, torch.arange(S), q.dtype, 5).attend(q, k, v) - plain).abs().max()
    assert gap < 1e-5 if name == "self_extend_g1" else gap > 1e-2


def test_pairs_as_the_papers_write_them():
    """Frozen positions of a few pairs, from the formulas in the papers and reference code."""
    se = SelfExtend(group=4, window=8, original_length=64)
    assert pair_positions(se, 20, 13) == (20, 13)  # inside the window: exact
    assert pair_positions(se, 20, 12) == (20 // 4 + 8 - 2, 3)  # grouped: the distance 8 at the edge
    rr = ReRoPE(window=6, original_length=64)
    assert pair_positions(rr, 30, 2) == (6, 0)
    sinks = AttentionSinks(n_sink=4, window=8, original_length=64)
    assert pair_positions(sinks, 30, 1) == (11, 1)  # query at the last of 12 cache slots
    assert pair_positions(sinks, 30, 25) == (11, 6)
    assert pair_positions(sinks, 30, 10) is None
    dca = DualChunk(chunk_size=12, local_window=4, original_length=64)  # chunks of 8
    assert pair_positions(dca, 19, 17) == (3, 1)  # intra
    assert pair_positions(dca, 19, 9) == (min(3 + 8, 12), 1)  # successive
    assert pair_positions(dca, 19, 1) == (12, 1)  # inter: min(2·8 − 1, 12)


def test_band_pieces_cover_every_pair_once():
    """Every (i, j ≤ i) pair of a block is scored by exactly one view (sinks: the far view only
    for keys below n_sink)."""
    for window, far_keys in ((5, None), (1, None), (5, 2), (30, None)):
        for start, stop in ((0, 7), (7, 14), (14, 23)):
            hits = torch.zeros(stop - start, stop, dtype=torch.long)
            i = torch.arange(start, stop)[:, None]
            for p in band_pieces(start, stop, window, far_keys):
                j = torch.arange(p.start, p.stop)[None, :]
                keep = (j <= i) & (p.rule(i, j) if p.rule else True)
                hits[:, p.start : p.stop] += keep.long()
            ii, jj = torch.meshgrid(torch.arange(start, stop), torch.arange(stop), indexing="ij")
            expected = (jj <= ii) & ((ii - jj < window) | (jj < (far_keys if far_keys is not None else stop)))
            assert torch.equal(hits, expected.long())


@pytest.mark.parametrize("name", ["self_extend", "rerope", "leaky_rerope", "sinks", "dual_chunk"])
def test_blocks_stay_a_chunk_of_queries_wide(name):
    """At 4096 tokens in chunks of 64 queries, every block scores its queries against at most
    s + 2·chunk keys (a key in two pieces counts twice): never an (s, s) tensor."""
    remap = {
        "self_extend": SelfExtend(group=8, window=256, original_length=1024),
        "rerope": ReRoPE(window=256, original_length=1024),
        "leaky_rerope": LeakyReRoPE(window=256, original_length=1024),
        "sinks": AttentionSinks(n_sink=4, window=1000, original_length=1024),
        "dual_chunk": DualChunk(original_length=1024),
    }[name]
    s, chunk = 4096, 64
    for start in range(0, s, chunk):
        stop = start + chunk
        keys = sum(max(0, p.stop - p.start) for p in remap.pieces(start, stop))
        assert keys <= stop + 2 * chunk
        assert all(0 <= p.start and p.stop <= stop for p in remap.pieces(start, stop))
    if name == "sinks":  # a sliding window: each block sees the window and the sinks only
        assert sum(max(0, p.stop - p.start) for p in remap.pieces(s - chunk, s)) <= 1000 + chunk + 4


@pytest.mark.parametrize("name", ["self_extend", "sinks", "dual_chunk"])
def test_gradients_equal_the_construction(name):
    """A fine-tune runs through the remap: its gradients with respect to q, k and v are the construction's."""
    remap, pe = REMAPS[name], RoPE(16)
    grads = []
    for attend in (
        lambda q, k, v: remap.prepare(pe, torch.arange(S), q.dtype, 5, 3).attend(q, k, v),
        lambda q, k, v: reference_attention(remap, pe, q, k, v),
    ):
        q, k, v = (t.clone().requires_grad_() for t in qkv())
        (attend(q, k, v) * torch.linspace(-1, 1, 16)).sum().backward()
        grads.append((q.grad, k.grad, v.grad))
    for got, expected in zip(*grads):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["self_extend", "sinks", "dual_chunk"])
def test_bfloat16_inputs_stay_close_to_the_float32_construction(name):
    """bf16 q, k, v (a real model's dtype): scores in bf16, the softmax and its sums in float32."""
    remap, pe = REMAPS[name], RoPE(16)
    q, k, v = qkv()
    got = remap.prepare(pe, torch.arange(S), torch.bfloat16, 4, 3).attend(q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), reference_attention(remap, pe, q, k, v), atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize(
    "pe", [RoPE(16, layout="interleaved"), RoPE(16, rotary_fraction=0.5)], ids=["interleaved", "partial"]
)
@pytest.mark.parametrize("name", ["self_extend", "leaky_rerope", "dual_chunk"])
def test_interleaved_layout_and_partial_rotary(pe, name):
    remap = REMAPS[name]
    q, k, v = qkv()
    got = remap.prepare(pe, torch.arange(S), q.dtype, 6, 4).attend(q, k, v)
    torch.testing.assert_close(got, reference_attention(remap, pe, q, k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", REMAPS)
def test_max_distance_is_the_largest_of_the_construction(name):
    """Each remap's ``max_distance`` against the largest pos_q − pos_k of its attended pairs."""
    remap = REMAPS[name]
    for n in (1, 2, 4, 5, 6, 9, 11, 17, 30):
        pairs = [pair_positions(remap, i, j) for i in range(n) for j in range(i + 1)]
        assert remap.max_distance(n) == pytest.approx(max(q - k for q, k in filter(None, pairs))), n
