"""Class names a classifier's own architecture knows, so served top-k results read "tabby cat", not "281".

Nothing is downloaded: torchvision ships its weights' category lists, timm its ImageNet synsets and descriptions.
Labels in the checkpoint's metadata always win; these apply only when the head has exactly as many classes.
"""

from __future__ import annotations

from modelship.contract.iospec import TensorSpec


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
