"""Test models and fixtures around `modelship.testing.checkpoints` (every checkpoint form the loader accepts).

Also holds a small custom model, loaded through `--arch tests.checkpoint_factory:make_tinynet`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

from modelship.testing.checkpoints import FORMS, prefixed, save_form
from modelship.testing.realistic import make_realistic

__all__ = ["FORMS", "TinyNet", "make_tinynet", "outputs", "prefixed", "realistic", "save_form", "signature_cache"]


class TinyNet(nn.Module):
    """conv -> bn -> pool -> fc1 -> fc2; `fc1` is the name the rename tests change."""

    def __init__(self, num_classes: int = 3, width: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)
        self.fc1 = nn.Linear(width, 16)
        self.fc2 = nn.Linear(16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
        return self.fc2(torch.relu(self.fc1(x)))


def make_tinynet(num_classes: int = 3, width: int = 8) -> TinyNet:
    return TinyNet(num_classes=num_classes, width=width)


class Wrapped(nn.Module):
    """A model whose own parameter names start with `model.` (they must never be stripped)."""

    def __init__(self) -> None:
        super().__init__()
        self.model = TinyNet()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


SIZE = 64
# Fingerprint signatures persist here between test runs (the first run builds them; see docs/checkpoints.md).
SIGNATURE_CACHE = Path(tempfile.gettempdir()) / "modelship-test-signatures"


@pytest.fixture(scope="module")
def signature_cache():
    """Point the fingerprint's disk cache at a test-only folder, shared between runs."""
    patch = pytest.MonkeyPatch()
    patch.setenv("MODELSHIP_CACHE_DIR", str(SIGNATURE_CACHE))
    yield SIGNATURE_CACHE
    patch.undo()  # small inputs keep CNN forward passes fast; ViTs get their native 224


def realistic(model: torch.nn.Module, size: int = SIZE, seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor]:
    """The model made realistic, and a seeded input batch to compare outputs on."""
    torch.manual_seed(seed)
    example = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(seed))
    return make_realistic(model, example), example


def outputs(model: torch.nn.Module, example: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(example)
