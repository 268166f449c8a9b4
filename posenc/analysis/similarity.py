"""Does a learned 1D table learn the 2D grid? (seed claim C6; ViT paper, Figure 7 centre.)

The ViT paper shows, for every patch, the cosine similarity of its position embedding with every
other patch's: nearby patches end up similar, rows and columns emerge. The number beside the
figure here is the Spearman rank correlation between that similarity and minus the grid
distance over all pairs of distinct patches: near 0 for a random table, near 1 when similarity
falls with distance.
"""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F

from posenc.pe.grid import patch_positions


def cosine_similarity_matrix(embeddings: torch.Tensor) -> torch.Tensor:
    """(n, d) -> (n, n) cosine similarities, float64."""
    e = F.normalize(embeddings.detach().double(), dim=-1)
    return e @ e.T


def grid_distances(grid: tuple[int, int]) -> torch.Tensor:
    """(n, n) Euclidean distances between the patches of a grid (raster order)."""
    p = patch_positions(grid).double()
    return torch.cdist(p, p)


def grid_rank_correlation(similarity: torch.Tensor, grid: tuple[int, int]) -> float:
    """Spearman correlation of similarity with −distance over pairs i ≠ j (ties ranked by their mean)."""
    dist = grid_distances(grid)
    off = ~torch.eye(len(dist), dtype=torch.bool)
    sim, neg = pd.Series(similarity[off].numpy()), pd.Series((-dist[off]).numpy())
    # Spearman is Pearson on average ranks; pandas' method="spearman" would need SciPy.
    return float(sim.rank().corr(neg.rank()))
