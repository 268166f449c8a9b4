"""Which positions ``CausalLM.forward`` hands to its scheme: randomized only while training."""

import pytest
import torch

from posenc.models.lm import CausalLM
from posenc.pe.alibi import AlibiPE
from posenc.pe.fire import FirePE
from posenc.pe.kerple import KerpleLogPE
from posenc.pe.learned import LearnedPE
from posenc.pe.relative import RelativeBiasPE
from posenc.pe.rope import RoPE
from posenc.pe.sinusoidal import SinusoidalPE
from posenc.pe.t5 import T5BiasPE
from posenc.pe.xpos import XPos

R = {"randomized": True, "randomized_max": 300}
SCHEMES = {
    "learned": lambda: LearnedPE(dim=16, max_len=300, **R),
    "sinusoidal": lambda: SinusoidalPE(dim=16, **R),
    "rope": lambda: RoPE(head_dim=8, **R),
    "xpos": lambda: XPos(head_dim=8, **R),
    "relative": lambda: RelativeBiasPE(n_heads=2, **R),
    "t5": lambda: T5BiasPE(n_heads=2, **R),
    "alibi": lambda: AlibiPE(n_heads=2, **R),
    "kerple": lambda: KerpleLogPE(n_heads=2, **R),
    "fire": lambda: FirePE(n_heads=2, **R),
}


def record_positions(pe):
    seen = []
    for name in ("embedding", "rotation", "bias", "key_bias"):
        method = getattr(pe, name)

        def spy(positions, *args, _method=method):
            seen.append(positions.clone())
            return _method(positions, *args)

        setattr(pe, name, spy)
    return seen


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_training_draws_sorted_positions_from_the_range_evaluation_counts(name):
    torch.manual_seed(0)
    model = CausalLM(SCHEMES[name](), vocab_size=11, d_model=16, n_layers=1, n_heads=2)
    seen = record_positions(model.pe)
    idx = torch.randint(0, 11, (3, 20))

    model.train()
    torch.manual_seed(1)
    logits = model(idx)
    train_positions = seen[0]
    assert logits.shape == (3, 20, 11) and torch.isfinite(logits).all()
    assert train_positions.shape == (20,) and (train_positions.diff() > 0).all()
    assert int(train_positions.max()) < 300 and not torch.equal(train_positions, torch.arange(20))
    torch.manual_seed(1)
    model(idx)
    assert torch.equal(seen[-1], train_positions)  # seeded by torch's generator

    seen.clear()
    model.eval()
    model(idx)
    assert all(torch.equal(p, torch.arange(20)) for p in seen)

    seen.clear()
    model.train()
    given = torch.arange(20) * 3
    model(idx, given)
    assert all(torch.equal(p, given) for p in seen)  # explicit positions always win


def test_off_by_default():
    model = CausalLM(RoPE(head_dim=8), vocab_size=11, d_model=16, n_layers=1, n_heads=2).train()
    seen = record_positions(model.pe)
    model(torch.randint(0, 11, (2, 9)))
    assert torch.equal(seen[0], torch.arange(9))
