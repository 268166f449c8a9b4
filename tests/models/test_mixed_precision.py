"""Under autocast (train.precision=bf16/fp16) positions, rotary cos/sin and position biases are
computed in float32; only their result is cast to the attention's dtype."""

import pytest
import torch

from posenc.engine.build import build
from posenc.engine.config import compose

SMALL = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.mlp_hidden=48", "train.seq_len=16"]


def spy(pe, *names):
    """Record the dtype of every tensor the scheme's ``names`` methods return."""
    seen = {name: [] for name in names}
    for name in names:
        method = getattr(pe, name)

        def wrapped(*args, _method=method, _name=name, **kwargs):
            out = _method(*args, **kwargs)
            seen[_name] += [t.dtype for t in (out if isinstance(out, tuple) else (out,)) if t is not None]
            return out

        setattr(pe, name, wrapped)
    return seen


@pytest.mark.parametrize(
    "pe,extra,positions,methods",
    [
        ("rope", [], None, ("rotation",)),
        ("xpos", [], None, ("rotation",)),
        ("fire", [], None, ("bias",)),  # an MLP: under autocast its Linears would run in bf16
        ("fire", ["+model.bias_chunk=4"], torch.arange(600, 616), ("distance_rows",)),  # past L, per query row
        ("t5", ["+model.bias_chunk=4"], None, ("distance_bias",)),
        ("kerple", [], None, ("bias",)),
        ("sinusoidal", [], None, ("embedding",)),
    ],
)
def test_lm_position_tensors_are_float32_under_bf16_autocast(pe, extra, positions, methods):
    """Fails without ``pe.base.float32`` around them (FIRE's bias came out bfloat16)."""
    model = build(compose([*SMALL, f"pe={pe}", *extra])).model
    seen = spy(model.pe, *methods)
    x = torch.randint(0, 256, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x, positions)
    assert logits.dtype == torch.bfloat16  # autocast did run
    for name in methods:
        assert seen[name] and set(seen[name]) == {torch.float32}, (name, seen[name])


@pytest.mark.parametrize("pe,methods", [("rope2d_axial", ("rotation",)), ("rel2d", ("bias",))])
def test_vit_position_tensors_are_float32_under_bf16_autocast(pe, methods):
    """Fails on the old ViT, which asked for cos/sin in the patches' dtype (bf16 out of the conv)."""
    model = build(compose(["model=vit_tiny", f"pe={pe}", "task.resolution=16", "train.seq_len=64"])).model
    seen = spy(model.pe, *methods)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.randn(2, 3, 16, 16))
    for name in methods:
        assert seen[name] and set(seen[name]) == {torch.float32}, (name, seen[name])
