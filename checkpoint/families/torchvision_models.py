"""torchvision's models: names from its registry (`resnet50`), preprocessing and labels from the DEFAULT weights'
transforms and meta (reading the enum downloads nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelship.checkpoint.arch import torchvision_models
from modelship.checkpoint.families.registry import ModelFamily, ReferenceTransform, register_family
from modelship.contract.errors import PreprocessError
from modelship.contract.preprocessing import PreprocessSpec


def _default_weights(arch: str) -> Any:
    from torchvision.models import get_model_weights

    return getattr(get_model_weights(arch), "DEFAULT", None)


def serving_spec(model: Any, arch: str, checkpoint: Path) -> PreprocessSpec | None:
    from modelship.preprocess import from_torchvision

    default = _default_weights(arch)
    try:
        return from_torchvision(default) if default is not None else None
    except PreprocessError:  # e.g. video or optical-flow presets: no image-classification spec to derive
        return None


def reference_transform(model: Any, arch: str, checkpoint: Path) -> ReferenceTransform | None:
    default = _default_weights(arch)
    return ReferenceTransform(default.transforms(), f"torchvision {default}.transforms()") if default else None


def labels(arch: str, classes: int) -> list[str] | None:
    default = _default_weights(arch)
    categories = default.meta.get("categories") if default is not None else None
    return list(categories) if categories else None


FAMILY = register_family(
    ModelFamily(
        "torchvision",
        owns=lambda arch: arch in torchvision_models(),
        serving_spec=serving_spec,
        reference_transform=reference_transform,
        labels=labels,
    )
)
