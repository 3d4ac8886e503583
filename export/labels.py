"""Class names a classifier's own architecture knows, so served top-k results read "tabby cat", not "281".

Nothing is downloaded: torchvision ships its weights' category lists, timm its ImageNet synsets and descriptions.
Labels in the checkpoint's metadata always win; these apply only when the head has exactly as many classes.
"""

from __future__ import annotations

from typing import Any

from export.errors import ModelshipError
from export.iospec import TensorSpec


def default_labels(arch: str, output: TensorSpec) -> list[str] | None:
    """The category names of `arch`'s reference weights when `output` (batch, classes) has as many classes."""
    classes = output.shape[-1] if len(output.shape) == 2 else None
    if not isinstance(classes, int):
        return None
    names = _timm_labels(arch.removeprefix("timm/"), classes) if arch.startswith("timm/") else _torchvision(arch)
    return names if names is not None and len(names) == classes else None


def _torchvision(arch: str) -> list[str] | None:
    from torchvision.models import get_model_weights, list_models

    if arch not in list_models():
        return None
    weights = getattr(get_model_weights(arch), "DEFAULT", None)
    categories = weights.meta.get("categories") if weights is not None else None
    return list(categories) if categories else None


def _timm_labels(name: str, classes: int) -> list[str] | None:
    from timm.data import ImageNetInfo, infer_imagenet_subset
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    subset = infer_imagenet_subset(cfg.to_dict()) if cfg is not None else None
    if subset is None:
        return None
    info = ImageNetInfo(subset)
    if info.num_classes() != classes:
        return None
    return [info.index_to_description(i).split(",")[0] for i in range(classes)]


def clean_labels(labels: Any, source: str) -> tuple[list[str], list[int]]:
    """Labels as Triton's one-label-per-line `labels.txt` needs them: strings (ints are written as text) with
    every line break replaced by a space, so the file has exactly one line per class. Returns the labels and the
    indices that changed; a ModelshipError for anything that is not a list of strings."""
    if not isinstance(labels, (list, tuple)) or not all(isinstance(v, (str, int)) for v in labels):
        raise ModelshipError(
            f"{source}: labels must be a list of strings (one per class), got {_describe(labels)}",
            hint="fix the labels, or pass --labels FILE to publish",
        )
    cleaned = [" ".join(str(label).splitlines()).strip() if isinstance(label, str) else str(label) for label in labels]
    changed = [i for i, (old, new) in enumerate(zip(labels, cleaned, strict=True)) if str(old) != new]
    return cleaned, changed


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        odd = next(v for v in value if not isinstance(v, (str, int)))
        return f"a list holding a {type(odd).__name__}"
    return f"a {type(value).__name__}"
