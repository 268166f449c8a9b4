"""The C6 number: rank correlation between embedding similarity and closeness on the grid."""

import torch

from posenc.analysis.similarity import cosine_similarity_matrix, grid_distances, grid_rank_correlation
from posenc.pe.grid import patch_positions
from posenc.pe.sincos2d import sincos_2d


def test_similarity_that_falls_with_distance_scores_one():
    grid = (4, 5)
    sim = torch.exp(-grid_distances(grid))
    assert abs(grid_rank_correlation(sim, grid) - 1.0) < 1e-12
    assert abs(grid_rank_correlation(-sim, grid) + 1.0) < 1e-12


def test_random_table_scores_near_zero_and_sincos_high():
    grid = (8, 8)
    random = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    assert abs(grid_rank_correlation(cosine_similarity_matrix(random), grid)) < 0.1
    smooth = sincos_2d(patch_positions(grid), 32, base=100.0)
    assert grid_rank_correlation(cosine_similarity_matrix(smooth), grid) > 0.5


def test_cosine_similarity_matrix():
    e = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, -2.0]])
    s = cosine_similarity_matrix(e)
    torch.testing.assert_close(s.diagonal(), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(s[0, 1], torch.tensor(2**-0.5, dtype=torch.float64))
    torch.testing.assert_close(s[0, 2], torch.tensor(0.0, dtype=torch.float64))
