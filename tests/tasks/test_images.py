"""Synthetic shapes: deterministic, resolution-free scenes whose labels match the pixels."""

import pytest
import torch
import torch.nn.functional as F

from posenc.core.errors import ConfigError
from posenc.tasks.images import ShapesTask


def centroid(mask):
    """(n, H, W) bool -> (n, 2) mean (row, col) in [0, 1]."""
    h = mask.shape[-1]
    u = (torch.arange(h) + 0.5) / h
    m = mask.float()
    return torch.stack(((m.sum(-1) * u).sum(-1), (m.sum(-2) * u).sum(-1)), -1) / m.sum((-1, -2))[:, None]


def test_quadrant_labels_match_where_the_object_is():
    task = ShapesTask("quadrant", resolution=32, val_size=200, noise=0.0)
    x, y = task.eval_set(32)
    assert x.shape == (200, 3, 32, 32) and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    c = centroid(x.min(dim=1).values > 0.3)  # object colours are >= 0.5 in every channel, background <= 0.15
    expected = 2 * (c[:, 0] > 0.5).long() + (c[:, 1] > 0.5).long()
    assert torch.equal(expected, y)
    assert torch.bincount(y, minlength=4).min() > 30


@pytest.mark.parametrize("label,axis", [("above", 0), ("left", 1)])
def test_relation_labels_match_red_and_blue(label, axis):
    task = ShapesTask(label, resolution=32, val_size=100, noise=0.0)
    x, y = task.eval_set(32)
    red = (x[:, 0] > 0.6) & (x[:, 2] < 0.4)
    blue = (x[:, 2] > 0.6) & (x[:, 0] < 0.4)
    first = centroid(red)[:, axis] < centroid(blue)[:, axis]
    assert torch.equal(first.long(), y)


def test_scenes_are_the_same_at_every_resolution_and_deterministic():
    task = ShapesTask("shape", resolution=32, val_size=16, noise=0.0)
    x32, y32 = task.eval_set(32)
    x64, y64 = task.eval_set(64)
    assert torch.equal(y32, y64)
    assert (F.avg_pool2d(x64, 2) - x32).abs().mean() < 0.02  # same scene, finer sampling
    x32b, _ = ShapesTask("shape", resolution=32, val_size=16, noise=0.0).eval_set(32)
    assert torch.equal(x32, x32b)
    a, la = task.train_batch(8, 32, torch.Generator().manual_seed(3))
    b, lb = task.train_batch(8, 32, torch.Generator().manual_seed(3))
    c, _ = task.train_batch(8, 32, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and torch.equal(la, lb) and not torch.equal(a, c)
    assert task.train_batch(4, 24, torch.Generator())[0].shape == (4, 3, 24, 24)


def test_bad_task_values():
    with pytest.raises(ConfigError, match="task.label 'color' is not a label; valid: quadrant, above, left, shape"):
        ShapesTask("color")
    with pytest.raises(ConfigError, match="task.resolution must be >= 4"):
        ShapesTask(resolution=2)
