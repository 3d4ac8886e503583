"""DigitsNet: the small CNN the demo trains on scikit-learn's handwritten digits (upsampled to 3x32x32)."""

from __future__ import annotations

import torch
from torch import nn

IMAGE_SIZE = 32


class DigitsNet(nn.Module):
    """Three conv blocks and a linear head (about 25k parameters). The first conv has stride 2: the 32x32 input
    is an upsampled 8x8 digit, so it halves the compute for free."""

    image_size = IMAGE_SIZE  # read by export-model to size the example input

    def __init__(self, num_classes: int = 10, width: int = 16) -> None:
        super().__init__()

        def block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
            conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            return nn.Sequential(conv, nn.BatchNorm2d(cout), nn.ReLU())

        self.features = nn.Sequential(
            block(3, width, stride=2), block(width, 2 * width), nn.MaxPool2d(2), block(2 * width, 4 * width)
        )
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(image).mean(dim=(2, 3)))
