"""Build checkpoint files in every form the loader accepts, from real (randomly initialised) models.

Also holds a small custom model, loaded through `--arch tests.checkpoint_factory:make_tinynet`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from export.realistic import make_realistic


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


def prefixed(state_dict: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + key: value for key, value in state_dict.items()}


def save_form(path: Path, state_dict: dict[str, torch.Tensor], form: str, **extra: Any) -> Path:
    """Write `state_dict` in one of FORMS; `extra` entries go beside the weights (torch forms only)."""
    FORMS[form](path, dict(state_dict), extra)
    return path


def _bare(path: Path, sd: dict, extra: dict) -> None:
    torch.save({**sd, **extra}, path)


def _training(path: Path, sd: dict, extra: dict) -> None:
    optimizer = {"state": {0: {"momentum_buffer": torch.zeros(3)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}
    torch.save({"epoch": 7, "state_dict": sd, "optimizer": optimizer, **extra}, path)


def _ema(path: Path, sd: dict, extra: dict) -> None:
    raw = {k: v + 1.0 if v.is_floating_point() else v for k, v in sd.items()}  # the raw weights differ from EMA
    torch.save({"epoch": 7, "state_dict": raw, "state_dict_ema": sd, "optimizer": {}, **extra}, path)


def _lightning(path: Path, sd: dict, extra: dict) -> None:
    torch.save(
        {
            "epoch": 3,
            "global_step": 300,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": prefixed(sd, "model."),
            "optimizer_states": [{}],
            "lr_schedulers": [],
            "hyper_parameters": {"lr": 0.01, **extra.pop("hyper_parameters", {})},
            **extra,
        },
        path,
    )


def _safetensors(path: Path, sd: dict, extra: dict) -> None:
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path), metadata={k: str(v) for k, v in extra.items()})


def _legacy(path: Path, sd: dict, extra: dict) -> None:
    torch.save({**sd, **extra}, path, _use_new_zipfile_serialization=False)


FORMS: dict[str, Callable[[Path, dict, dict], None]] = {
    "bare": _bare,
    "training": _training,
    "ema": _ema,
    "lightning": _lightning,
    "safetensors": _safetensors,
    "legacy": _legacy,
}


def outputs(model: torch.nn.Module, example: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(example)
