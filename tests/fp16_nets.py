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


class NaiveNorm(nn.Module):
    """A hand-written LayerNorm over channels: its squared deviations pass float16's range on large activations."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centered = x - x.mean(dim=1, keepdim=True)
        return centered / torch.sqrt((centered**2).mean(dim=1, keepdim=True) + 1e-5)


class LoudNorm(nn.Module):
    """conv (activations in the hundreds) -> NaiveNorm -> pool -> linear: `norm` overflows in float16."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = NaiveNorm()
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.conv(x) * 300).mean(dim=(2, 3)))


class Gate(nn.Module):
    """Branches on the batch size: tracing at batch 2 records one branch for every batch size."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 2:
            return x * -3
        return x * 2


class Branchy(nn.Module):
    """conv -> gate -> pool -> linear: exported with --trace, `gate` is wrong beyond batch 2."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gate = Gate()
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.gate(self.conv(x)).mean(dim=(2, 3)))


class Layers(nn.Module):
    """Three convolutions and a head, for corrupting one layer's weights."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv3(torch.relu(self.conv2(torch.relu(self.conv1(x))))))
        return self.head(x.mean(dim=(2, 3)))


class Whisper(nn.Module):
    """Outputs all below 1e-8: float16 flushes them to zero."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3))) * 1e-9
