"""timm's models, named `timm/NAME`: built by `timm.create_model(NAME, pretrained=False)`, claimed by a checkpoint
when their pretrained config's first conv is among its keys; preprocessing from the model's pretrained_cfg (timm's
data config, as `timm.data.create_transform` applies it at eval time), labels from timm's ImageNet synsets (shipped,
not downloaded)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from modelship.checkpoint.families.registry import ModelFamily, ReferenceTransform, TrainingRecord, register_family
from modelship.contract.errors import ArchitectureError
from modelship.contract.preprocessing import PreprocessSpec

PREFIX = "timm/"
CONFIG_KEYS = ("input_size", "interpolation", "crop_pct", "crop_mode", "mean", "std")
PREFERENCE = 1  # when weights fit a torchvision model too, torchvision's is chosen


@cache
def models() -> tuple[str, ...]:
    """Every timm model name (with the prefix); none when timm is not installed."""
    try:
        import timm
    except ImportError:
        return ()
    return tuple(PREFIX + name for name in timm.list_models())


def canonical(name: str) -> str | None:
    if not name.startswith(PREFIX):
        return None
    if not models():
        raise ArchitectureError(f"--arch {name!r}: timm is not installed", hint="pip install timm")
    import timm

    return name if timm.is_model(name.removeprefix(PREFIX)) else None


def build(arch: str) -> Callable[..., Any]:
    import timm

    return lambda **kwargs: timm.create_model(arch.removeprefix(PREFIX), pretrained=False, **kwargs)


def candidates(keys: set[str]) -> list[str]:
    """timm models whose pretrained config's first conv exists in the checkpoint."""
    from timm.models import get_pretrained_cfg

    chosen = []
    for arch in models():
        cfg = get_pretrained_cfg(arch.removeprefix(PREFIX))
        if cfg is None or not cfg.first_conv:
            continue
        convs = [cfg.first_conv] if isinstance(cfg.first_conv, str) else list(cfg.first_conv)
        if any(f"{conv}.weight" in keys for conv in convs):
            chosen.append(arch)
    return chosen


def default_classes(arch: str) -> int:
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(arch.removeprefix(PREFIX))
    return int(cfg.num_classes) if cfg is not None and cfg.num_classes is not None else 1000


def input_size(model: Any, arch: str) -> tuple[int, int] | None:
    cfg = getattr(model, "pretrained_cfg", None)
    if isinstance(cfg, dict) and cfg.get("input_size"):
        _, height, width = cfg["input_size"]
        return int(height), int(width)
    return None


def serving_spec(model: Any, arch: str, checkpoint: Path) -> PreprocessSpec | None:
    from modelship.preprocess import from_timm

    return from_timm(model) if getattr(model, "pretrained_cfg", None) else from_timm(arch.removeprefix(PREFIX))


def reference_transform(model: Any, arch: str, checkpoint: Path) -> ReferenceTransform:
    from timm.data import create_transform, resolve_data_config

    config = resolve_data_config(model=model)
    described = ", ".join(f"{k}={config[k]}" for k in CONFIG_KEYS if k in config)
    return ReferenceTransform(create_transform(**config), f"timm create_transform({described})")


def labels(arch: str, classes: int) -> list[str] | None:
    from timm.data import ImageNetInfo, infer_imagenet_subset
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(arch.removeprefix(PREFIX))
    subset = infer_imagenet_subset(cfg.to_dict()) if cfg is not None else None
    if subset is None:
        return None
    info = ImageNetInfo(subset)
    if info.num_classes() != classes:
        return None
    return [info.index_to_description(i).split(",")[0] for i in range(classes)]


def version() -> str | None:
    if not models():
        return None
    import timm

    return f"timm{timm.__version__}"


def training_record(content: Any) -> TrainingRecord | None:
    """`arch`/`arch_kwargs` from the `args` timm's train.py saves beside the weights (model name, num_classes)."""
    args = content.get("args") if isinstance(content, Mapping) else None
    if isinstance(args, argparse.Namespace):
        args = vars(args)
    if not isinstance(args, Mapping) or not isinstance(args.get("model"), str) or not models():
        return None
    kwargs = {"num_classes": args["num_classes"]} if isinstance(args.get("num_classes"), int) else {}
    fields = {"arch": PREFIX + args["model"], "arch_kwargs": kwargs}
    return TrainingRecord(fields, "timm train.py args stored in the checkpoint")


FAMILY = register_family(
    ModelFamily(
        "timm",
        owns=lambda arch: arch.startswith(PREFIX),
        canonical=canonical,
        known=models,
        build=build,
        candidates=candidates,
        default_classes=default_classes,
        preference=PREFERENCE,
        training_record=training_record,
        registry=True,
        input_size=input_size,
        serving_spec=serving_spec,
        reference_transform=reference_transform,
        labels=labels,
        version=version,
    )
)
