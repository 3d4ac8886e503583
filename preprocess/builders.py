"""PreprocessSpecs from the configs models ship with: timm's data config and torchvision's weights transforms.

timm and torchvision are imported inside the functions only, so `import preprocess` never imports torch.
"""

from __future__ import annotations

import math
from typing import Any, cast

from modelship.contract.errors import PreprocessError
from modelship.contract.json_object import JsonObject
from modelship.contract.preprocessing import (
    ChannelOrder,
    CropOffset,
    Interpolation,
    Layout,
    PreprocessSpec,
    Resampler,
    ResizeMode,
)

DEFAULT_CROP_PCT = 0.875  # timm's default when a config has none


def from_timm_config(config: JsonObject) -> PreprocessSpec:
    """From a timm data config (`resolve_data_config` output) or pretrained_cfg: `input_size`, `interpolation`,
    `crop_pct`, `crop_mode`, `mean`, `std`, as `timm.data.create_transform(**config)` applies them at eval time:
    resize to `floor(size / crop_pct)` (shorter side; both sides for crop_mode "squash"), center crop to size."""
    try:
        _, height, width = config["input_size"]
    except (KeyError, TypeError, ValueError):
        raise PreprocessError(f"timm config needs input_size (C, H, W), got {config.get('input_size')!r}") from None
    crop_pct = config.get("crop_pct") or DEFAULT_CROP_PCT
    crop_mode = config.get("crop_mode") or "center"
    scaled = (math.floor(height / crop_pct), math.floor(width / crop_pct))
    if crop_mode == "squash":
        resize, mode = scaled, ResizeMode.EXACT
    elif crop_mode == "center" and height == width:
        resize, mode = scaled[0], ResizeMode.SHORTER
    else:
        raise PreprocessError(
            f"timm crop_mode {crop_mode!r} with input size {height}x{width} is not supported",
            hint="supported: crop_mode 'center' with a square input, or 'squash'",
        )
    return PreprocessSpec(
        resize=resize,
        resize_mode=mode,
        crop=(height, width),
        interpolation=_interpolation("timm", config.get("interpolation", Interpolation.BILINEAR)),
        mean=tuple(config["mean"]),
        std=tuple(config["std"]),
    )


def _interpolation(source: str, value: Any) -> Interpolation:
    """`value`, a config's interpolation, as an Interpolation; one the spec has none of is refused, naming `source`."""
    if value not in tuple(Interpolation):
        raise PreprocessError(
            f"{source} interpolation {value!r} is not supported", hint=f"use one of {', '.join(Interpolation)}"
        )
    return Interpolation(value)


def from_timm(source: Any) -> PreprocessSpec:
    """From a timm model (its pretrained_cfg), a timm model name, or a data/pretrained config dict."""
    from timm.data import resolve_data_config
    from timm.models import get_pretrained_cfg

    if isinstance(source, dict):
        return from_timm_config(resolve_data_config(pretrained_cfg=source))
    if isinstance(source, str):
        cfg = get_pretrained_cfg(source)
        if cfg is None:
            raise PreprocessError(f"timm has no pretrained config for {source!r}", hint="pass the model or its config")
        return from_timm_config(resolve_data_config(pretrained_cfg=cfg.to_dict()))
    return from_timm_config(resolve_data_config(model=source))


def from_torchvision(weights: Any) -> PreprocessSpec:
    """From a torchvision weights enum (`ResNet50_Weights.IMAGENET1K_V2`) or its name ("ResNet50_Weights.IMAGENET1K_V2"
    / "resnet50.IMAGENET1K_V2" style accepted by `torchvision.models.get_weight`), via its ImageClassification
    transforms (resize_size, crop_size, interpolation, mean, std, antialias), a segmentation model's through its
    SemanticSegmentation transforms (the shorter side resized, no crop), a detector's ObjectDetection preset (the
    pixels in [0, 1] as they are: the detector resizes and normalises inside). Nothing is downloaded."""
    from torchvision.models import get_weight
    from torchvision.transforms._presets import ImageClassification, ObjectDetection, SemanticSegmentation

    if isinstance(weights, str):
        try:
            weights = get_weight(weights)
        except (ValueError, KeyError, AttributeError) as exc:
            raise PreprocessError(f"unknown torchvision weights {weights!r} ({exc})") from None
    preset = weights.transforms()
    if isinstance(preset, ObjectDetection):
        return PreprocessSpec(resize=None, crop=None, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    if not isinstance(preset, ImageClassification | SemanticSegmentation):
        raise PreprocessError(f"{weights}: transforms are {type(preset).__name__}, not an image preset")
    return PreprocessSpec(
        resize=preset.resize_size[0] if preset.resize_size else None,
        crop=preset.crop_size[0] if isinstance(preset, ImageClassification) else None,
        interpolation=_interpolation(f"{weights}:", preset.interpolation.value),
        antialias=bool(preset.antialias),
        mean=tuple(preset.mean),
        std=tuple(preset.std),
    )


def to_torchvision(spec: PreprocessSpec) -> Any:
    """The torchvision `transforms.Compose` a training script would write for `spec`: RGB PIL image in, tensor out
    (C, H, W) or (H, W, C) per the layout, channels reordered to BGR when asked, in the spec's dtype.

    Resize (shorter side, or exact (height, width)), CenterCrop, PILToTensor, then `x / (1 / scale)` and
    Normalize(mean, std) in float32 - `ToTensor() + Normalize()` for the default scale of 1/255. The torch resampler
    resizes the uint8 tensor (torchvision v2), a floor crop offset crops as transformers does, and a fused
    normalisation normalises by `mean / scale` and `std / scale`. torch is imported here only, so
    `import preprocess` stays torch-free.
    """
    import torch
    from torchvision import transforms as T
    from torchvision.transforms.v2 import functional as F

    interpolation = T.InterpolationMode(spec.interpolation)
    steps: list[Any] = []
    if spec.resize is not None and spec.resampler is Resampler.PILLOW and spec.resize_mode is ResizeMode.BOUNDED:
        steps.append(T.Lambda(lambda image: _pil_resize(image, spec)))
    elif spec.resize is not None and spec.resampler is Resampler.PILLOW:
        steps.append(T.Resize(spec.resize, interpolation=interpolation))  # PIL resizing always antialiases
    steps.append(T.PILToTensor())
    if spec.resize is not None and spec.resampler is Resampler.TORCH:  # PyTorch's uint8 kernel, on the uint8 tensor
        steps.append(T.Lambda(lambda pixels: F.resize(pixels, list(_tensor_size(pixels, spec)), interpolation)))
    if spec.crop is not None:
        floor = T.Lambda(lambda pixels: _floor_crop(pixels, spec))
        steps.append(T.CenterCrop(spec.crop) if spec.crop_offset is CropOffset.ROUND else floor)
    divisor = 1.0 / spec.scale
    if spec.fused_normalize:
        steps.append(T.Lambda(lambda pixels: pixels.to(torch.float32)))
        mean, std = torch.tensor(spec.mean) * divisor, torch.tensor(spec.std) * divisor  # float32 products
        steps.append(T.Normalize(mean.tolist(), std.tolist()))
    else:
        steps.append(T.Lambda(lambda pixels: pixels.to(torch.float32) / divisor))
        steps.append(T.Normalize(spec.mean, spec.std))
    if spec.channel_order is ChannelOrder.BGR:
        steps.append(T.Lambda(lambda values: values.flip(0)))
    if spec.layout is Layout.NHWC:
        steps.append(T.Lambda(lambda values: values.permute(1, 2, 0)))
    dtype = getattr(torch, spec.dtype)
    steps.append(T.Lambda(lambda values: values.to(dtype).contiguous()))
    return T.Compose(steps)


def _pil_resize(image: Any, spec: PreprocessSpec) -> Any:
    from modelship.preprocess.image import PIL_FILTERS, resized_size

    height, width = resized_size(image.height, image.width, spec)
    return image.resize((width, height), PIL_FILTERS[spec.interpolation])


def _tensor_size(pixels: Any, spec: PreprocessSpec) -> tuple[int, int]:
    from modelship.preprocess.image import resized_size

    return resized_size(pixels.shape[-2], pixels.shape[-1], spec)


def _floor_crop(pixels: Any, spec: PreprocessSpec) -> Any:
    """transformers' centre crop of a (C, H, W) tensor: zero-padded when too small, offsets floored (torchvision's
    CenterCrop rounds them)."""
    from torchvision.transforms.v2 import functional as F

    height, width = cast("tuple[int, int]", spec.crop)  # PreprocessSpec makes every crop (height, width)
    extra_h, extra_w = max(height - pixels.shape[-2], 0), max(width - pixels.shape[-1], 0)
    if extra_h or extra_w:
        pixels = F.pad(pixels, [extra_w // 2, extra_h // 2, (extra_w + 1) // 2, (extra_h + 1) // 2], fill=0)
    top, left = (pixels.shape[-2] - height) // 2, (pixels.shape[-1] - width) // 2
    return F.crop(pixels, top, left, height, width)
