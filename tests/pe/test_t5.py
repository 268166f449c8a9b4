import pytest
import torch
from torch.testing import assert_close

from posenc.core.errors import ConfigError
from posenc.pe.t5 import T5BiasPE, t5_bucket

T5Attention = pytest.importorskip("transformers.models.t5.modeling_t5").T5Attention


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 40), (8, 20), (64, 1000)])
def test_buckets_equal_transformers(bidirectional, num_buckets, max_distance):
    relative = torch.arange(-3000, 3001)[None, :] + torch.zeros(2, 1, dtype=torch.long)  # (2, 6001)
    ours = t5_bucket(relative, bidirectional, num_buckets, max_distance)
    theirs = T5Attention._relative_position_bucket(relative, bidirectional, num_buckets, max_distance)
    assert torch.equal(ours, theirs)
    assert int(ours.max()) == num_buckets - 1  # every bucket up to the last one is used


def test_causal_buckets_frozen():
    # past keys: exact buckets 0..15, then log-spaced up to 128, then all in bucket 31
    distances = torch.tensor([0, 1, 15, 16, 17, 31, 32, 64, 127, 128, 5000])
    buckets = t5_bucket(-distances, bidirectional=False, num_buckets=32, max_distance=128)
    assert buckets.tolist() == [0, 1, 15, 16, 16, 21, 21, 26, 31, 31, 31]
    # future keys fold onto bucket 0 in the causal form
    assert t5_bucket(torch.tensor([1, 7, 300]), bidirectional=False).tolist() == [0, 0, 0]


def test_bias_reads_the_table_at_key_minus_query_bucket():
    torch.manual_seed(0)
    pe = T5BiasPE(n_heads=3, num_buckets=16, max_distance=40, bidirectional=True)
    pos = torch.arange(50)
    bias = pe.bias(pos, pos)  # (n_h, s, s)
    assert bias.shape == (3, 50, 50)
    buckets = T5Attention._relative_position_bucket(pos[None, :] - pos[:, None], True, 16, 40)
    assert_close(bias, pe.table[buckets].permute(2, 0, 1))


@pytest.mark.parametrize(
    "kwargs", [{"num_buckets": 1}, {"num_buckets": 32, "max_distance": 16}, {"num_buckets": 3, "bidirectional": True}]
)
def test_bad_settings(kwargs):
    with pytest.raises(ConfigError, match="pe.num_buckets|pe.max_distance"):
        T5BiasPE(n_heads=2, **kwargs)


@pytest.mark.parametrize("causal", [True, False])
def test_the_configured_model_buckets_as_hf_t5_for_its_attention(causal):
    """Fails on the old behaviour for ``causal=False``: ``configs/pe/t5.yaml`` fixed
    ``bidirectional: false``, so in a bidirectional model every future key shared the distance-0
    bucket. The built model's bias must read the table at Hugging Face's buckets, bidirectional
    (the T5 encoder's) exactly when the model has no causal mask."""
    from posenc.engine.build import build
    from posenc.engine.config import compose

    setup = build(
        compose(
            [
                "pe=t5",
                f"model.causal={str(causal).lower()}",
                "model.d_model=16",
                "model.n_heads=2",
                "model.n_layers=1",
                "pe.num_buckets=16",
                "pe.max_distance=40",
            ]
        )
    )
    pe = setup.model.pe
    assert pe.bidirectional is (not causal)
    pos = torch.arange(60)
    relative = pos[None, :] - pos[:, None]  # (s_q, s_k) key minus query
    buckets = T5Attention._relative_position_bucket(relative, not causal, 16, 40)
    assert_close(pe.bias(pos, pos), pe.table[buckets].permute(2, 0, 1))
    assert (len(set(buckets[0, 1:].tolist())) > 1) is (not causal)  # causal: future keys all in bucket 0
