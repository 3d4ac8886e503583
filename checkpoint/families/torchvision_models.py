"""torchvision's models: names from its registry (`resnet50`, `torchvision/resnet50`), built by its builders with no
weights (and no backbone weights: segmenters' and detectors' builders would download ImageNet ones), preprocessing
and labels from the DEFAULT weights' transforms and meta (reading the enum downloads nothing). Detectors answer
behind one tensor interface (`families.torchvision_detector`); segmenters lose their training-only auxiliary head
unless asked.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from modelship.checkpoint.families.registry import (
    AUX_VARIANT,
    Adapted,
    ModelFamily,
    ReferenceTransform,
    register_family,
)
from modelship.contract.errors import PreprocessError
from modelship.contract.preprocessing import PreprocessSpec

PREFIX = "torchvision/"


@cache
def models(kind: str = "all") -> tuple[str, ...]:
    """torchvision's registry names: all, or those of one kind ("classification", "segmentation", "detection")."""
    import torchvision

    modules = {
        "all": None,
        "classification": torchvision.models,
        "segmentation": torchvision.models.segmentation,
        "detection": torchvision.models.detection,
    }
    return tuple(torchvision.models.list_models(module=modules[kind]))


@cache
def builder_takes(arch: str, parameter: str) -> bool:
    """Whether torchvision's builder of `arch` takes `parameter`: `weights_backbone` (segmentation and detection
    models; its default is an ImageNet download, so modelship always passes None: the checkpoint holds every
    weight), `aux_loss` (segmenters with an auxiliary head)."""
    import torchvision

    return parameter in inspect.signature(torchvision.models.get_model_builder(arch)).parameters


def canonical(name: str) -> str | None:
    model = name.removeprefix(PREFIX).lower()
    return model if model in models() else None


def build(arch: str) -> Callable[..., Any]:
    import torchvision

    offline = {"weights_backbone": None} if builder_takes(arch, "weights_backbone") else {}
    return lambda **kwargs: torchvision.models.get_model(arch, weights=None, **{**kwargs, **offline})


def candidates(keys: set[str]) -> list[str]:
    """Every classifier, segmenter (and those with an auxiliary head once more with it) and detector."""
    return [
        *models("classification"),
        *(variant for arch in models("segmentation") for variant in variants(arch)),
        *models("detection"),
    ]


def variants(arch: str) -> list[str]:
    """`arch`, and for a segmenter that can have an auxiliary head, `arch` built with it (AUX_VARIANT)."""
    with_aux = arch in models("segmentation") and builder_takes(arch, "aux_loss")
    return [arch, arch + AUX_VARIANT] if with_aux else [arch]


def default_classes(arch: str) -> int:
    """ImageNet's 1000; COCO's 91 for detectors (Keypoint R-CNN: person or not); VOC's 21 for segmenters."""
    if arch in models("detection"):
        return 2 if arch.startswith("keypointrcnn") else 91
    return 21 if arch in models("segmentation") else 1000


def adapt(model: Any, keep_aux: bool) -> Adapted:
    from modelship.checkpoint.families.torchvision_detector import DetectorTensors, is_detector

    notes = []
    if getattr(model, "aux_classifier", None) is not None and not keep_aux:
        # torchvision's segmentation models then return {"out"} alone. Removed as a submodule first: one set to None
        # stays in _modules, and TorchScript then finds it twice (a None submodule and the class's constant)
        del model.aux_classifier
        model.aux_classifier = None
        notes.append("the auxiliary head (aux_classifier, a training aid) is left out: --keep-aux exports it")
    if is_detector(model):
        model = DetectorTensors(model).eval()
        notes.append(
            f"detector: exported behind one tensor interface: a batch of images (RGB, 0..1) in; boxes, scores and "
            f"labels padded to {model.max_detections} rows per image, and num (the valid rows), out"
        )
    return Adapted(model, tuple(notes))


def input_size(model: Any, arch: str) -> tuple[int, int] | None:
    """The DEFAULT weights' crop size."""
    default = _default_weights(arch)
    crop = getattr(default.transforms, "keywords", {}).get("crop_size") if default is not None else None
    return (crop, crop) if isinstance(crop, int) else None


def _default_weights(arch: str) -> Any:
    from torchvision.models import get_model_weights

    try:
        return getattr(get_model_weights(arch), "DEFAULT", None)
    except (ValueError, AttributeError, KeyError):
        return None


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


def version() -> str:
    import torchvision

    return f"tv{torchvision.__version__}"


FAMILY = register_family(
    ModelFamily(
        "torchvision",
        owns=lambda arch: arch in models(),
        canonical=canonical,
        known=models,
        build=build,
        candidates=candidates,
        variants=variants,
        default_classes=default_classes,
        registry=True,
        adapt=adapt,
        input_size=input_size,
        serving_spec=serving_spec,
        reference_transform=reference_transform,
        labels=labels,
        version=version,
    )
)
