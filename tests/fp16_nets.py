"""Small nets that break in float16 where fp16 really runs, for the fp16 gate's tests (`--arch tests.fp16_nets:X`)."""

from __future__ import annotations

import torch
from torch import nn


class Squares(nn.Module):
    """Exact in fp32; in fp16 `(x * 1000 + 1000) ** 2` passes 65504 and the block returns inf/NaN."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt((x * 1000 + 1000) ** 2) / 1000 - 1


class Overflowing(nn.Module):
    """conv -> relu -> Squares -> mean -> linear: only the `block` module leaves float16's range."""

    def __init__(self, num_classes: int = 4) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.block = Squares()
        self.head = nn.Linear(8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(torch.relu(self.conv(x))).mean(dim=(2, 3)))
