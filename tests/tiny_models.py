"""Small models the tests share (tests/ is on sys.path through conftest.py)."""

import torch
from torch import nn

from posenc.models.blocks import Block


class TinyViT(nn.Module):
    """A ViT-shaped classifier (patches, cls prefix, bidirectional blocks, (b, C) logits)."""

    patch_size = 2

    def __init__(self, pe):
        super().__init__()
        torch.manual_seed(0)
        self.pe = pe
        self.embed = nn.Linear(3 * 2 * 2, 16)
        self.cls = nn.Parameter(torch.randn(1, 1, 16))
        self.blocks = nn.ModuleList(Block(16, 2, 2, 8, 32) for _ in range(2))
        self.head = nn.Linear(16, 5)

    def forward(self, images):
        b = images.shape[0]
        x = images.unfold(2, 2, 2).unfold(3, 2, 2).permute(0, 2, 3, 1, 4, 5).reshape(b, -1, 12)  # (b, n, c·p·p)
        x = self.embed(x)
        if self.pe.adds_embedding:
            x = x + self.pe.embedding(torch.arange(x.shape[1]))
        x = torch.cat((self.cls.expand(b, 1, 16), x), 1)  # (b, 1 + n, d)
        for block in self.blocks:
            x = block(x, self.pe, None, None, causal=False)
        return self.head(x[:, 0])  # (b, C)
