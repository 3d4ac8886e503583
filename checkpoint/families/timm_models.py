"""timm's models, named `timm/NAME`: preprocessing from the model's pretrained_cfg (timm's data config, as
`timm.data.create_transform` applies it at eval time), labels from timm's ImageNet synsets (shipped, not
downloaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelship.checkpoint.arch import TIMM_PREFIX
from modelship.checkpoint.families.registry import ModelFamily, ReferenceTransform, register_family
from modelship.contract.preprocessing import PreprocessSpec

CONFIG_KEYS = ("input_size", "interpolation", "crop_pct", "crop_mode", "mean", "std")


def serving_spec(model: Any, arch: str, checkpoint: Path) -> PreprocessSpec | None:
    from modelship.preprocess import from_timm

    return from_timm(model) if getattr(model, "pretrained_cfg", None) else from_timm(arch.removeprefix(TIMM_PREFIX))


def reference_transform(model: Any, arch: str, checkpoint: Path) -> ReferenceTransform:
    from timm.data import create_transform, resolve_data_config

    config = resolve_data_config(model=model)
    described = ", ".join(f"{k}={config[k]}" for k in CONFIG_KEYS if k in config)
    return ReferenceTransform(create_transform(**config), f"timm create_transform({described})")


def labels(arch: str, classes: int) -> list[str] | None:
    from timm.data import ImageNetInfo, infer_imagenet_subset
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(arch.removeprefix(TIMM_PREFIX))
    subset = infer_imagenet_subset(cfg.to_dict()) if cfg is not None else None
    if subset is None:
        return None
    info = ImageNetInfo(subset)
    if info.num_classes() != classes:
        return None
    return [info.index_to_description(i).split(",")[0] for i in range(classes)]


FAMILY = register_family(
    ModelFamily(
        "timm",
        owns=lambda arch: arch.startswith(TIMM_PREFIX),
        serving_spec=serving_spec,
        reference_transform=reference_transform,
        labels=labels,
    )
)
