"""PreprocessSpec: everything needed to turn an image into a model input, as a typed, serialisable value.

The manifest stores `spec.to_dict()`; `PreprocessSpec.from_option(value)` reads what `--preprocess` is given: inline
JSON or a JSON file of those fields (`read`), or `key=value` pairs (`parse`, e.g. `resize=256,crop=224`).
Order of operations (torchvision's Resize -> CenterCrop -> ToTensor -> Normalize): resize, center crop, divide by
`1 / scale`, subtract `mean`, divide by `std` (mean/std in RGB order), reorder channels, lay out, cast.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any, TypeVar, cast

from modelship.contract.errors import PreprocessError, UsageError
from modelship.contract.json_object import JsonObject
from modelship.contract.jsonfile import read_json_object

DTYPES = ("float32", "float16")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
MAX_SIDE = 16_384  # the largest resize or crop side: past it one image takes gigabytes
Mode = TypeVar("Mode", bound=StrEnum)


class ResizeMode(StrEnum):
    """How `resize` is read. SHORTER: the shorter side to `resize` (aspect kept); EXACT: to (height, width);
    BOUNDED: `resize` is (shortest, longest), the shorter side to shortest unless the longer would pass longest
    (Hugging Face's shortest_edge + longest_edge)."""

    SHORTER = "shorter"
    EXACT = "exact"
    BOUNDED = "bounded"


class Interpolation(StrEnum):
    """The resize filter (Pillow's, and torchvision's InterpolationMode of the same name)."""

    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    NEAREST = "nearest"


class Resampler(StrEnum):
    """Whose resize. PILLOW: Pillow's (torchvision on PIL images, timm); TORCH: PyTorch's antialiased uint8 kernel
    (Hugging Face's image processors in transformers 5, torchvision v2 on uint8 tensors), which differs from Pillow
    by a level at times."""

    PILLOW = "pillow"
    TORCH = "torch"


class CropOffset(StrEnum):
    """The centre crop's offset. ROUND: round((size - crop) / 2), torchvision's; FLOOR: (size - crop) // 2,
    transformers'."""

    ROUND = "round"
    FLOOR = "floor"


class ChannelOrder(StrEnum):
    """The order of the output's colour channels."""

    RGB = "RGB"
    BGR = "BGR"


class Layout(StrEnum):
    """Where the output's channels go: NCHW (channels first, as torchvision's tensors) or NHWC (channels last)."""

    NCHW = "NCHW"
    NHWC = "NHWC"


@dataclass(frozen=True)
class PreprocessSpec:
    """Resize, center-crop and normalize an RGB image.

    `resize` is the shorter side (an int) in SHORTER mode, `(height, width)` in EXACT mode, `(shortest, longest)` in
    BOUNDED mode (`resize_mode`, a ResizeMode), or None for no resize. `crop` is the center crop `(height, width)`
    (an int means a square), or None. `interpolation` is the resize filter (an Interpolation); `antialias` must stay
    True for bilinear/bicubic: Pillow always antialiases when downscaling, as torchvision does on PIL images.
    `channel_order` and `layout` (a ChannelOrder, a Layout) arrange the output. `apply_exif` rotates/flips images by
    their EXIF orientation tag when they are loaded from files. `resampler` and `crop_offset` name whose rules the
    resize and the crop follow (Resampler, CropOffset). The modes are also accepted by their values, as the manifest
    stores them.
    `fused_normalize` computes `(x - mean / scale) / (std / scale)` in float32, as transformers' torchvision backend
    does, instead of `(x * scale - mean) / std` (the same to within float32 rounding).
    """

    resize: int | tuple[int, int] | None = 256
    crop: int | tuple[int, int] | None = 224
    resize_mode: ResizeMode = ResizeMode.SHORTER
    interpolation: Interpolation = Interpolation.BILINEAR
    antialias: bool = True
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    scale: float = 1 / 255
    channel_order: ChannelOrder = ChannelOrder.RGB
    layout: Layout = Layout.NCHW
    dtype: str = "float32"
    apply_exif: bool = True
    resampler: Resampler = Resampler.PILLOW
    crop_offset: CropOffset = CropOffset.ROUND
    fused_normalize: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "resize_mode", _mode("resize_mode", self.resize_mode, ResizeMode))
        object.__setattr__(self, "interpolation", _mode("interpolation", self.interpolation, Interpolation))
        object.__setattr__(self, "resampler", _mode("resampler", self.resampler, Resampler))
        object.__setattr__(self, "crop_offset", _mode("crop_offset", self.crop_offset, CropOffset))
        if self.resampler is Resampler.TORCH and self.interpolation is Interpolation.NEAREST:
            raise PreprocessError(
                "the torch resampler takes bilinear or bicubic, not nearest",
                hint='use "resampler": "pillow" for nearest resizing',
            )
        object.__setattr__(self, "channel_order", _mode("channel_order", self.channel_order, ChannelOrder))
        object.__setattr__(self, "layout", _mode("layout", self.layout, Layout))
        _choice("dtype", self.dtype, DTYPES)
        if self.resize is not None:
            if self.resize_mode is ResizeMode.SHORTER:
                object.__setattr__(self, "resize", _size("resize", self.resize, square=False)[0])
            else:
                object.__setattr__(self, "resize", _size("resize", self.resize, square=True))
        if self.crop is not None:
            object.__setattr__(self, "crop", _size("crop", self.crop, square=True))
        for name in ("mean", "std"):
            values = getattr(self, name)
            if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) != 3:
                raise PreprocessError(f"preprocess {name} must hold 3 numbers (R, G, B), got {values!r}")
            object.__setattr__(self, name, tuple(_number(name, v) for v in values))
        if any(v <= 0 for v in self.std):
            raise PreprocessError(f"preprocess std must be > 0, got {self.std}")
        if _number("scale", self.scale) <= 0:
            raise PreprocessError(f"preprocess scale must be > 0, got {self.scale!r}", hint="e.g. 1/255")
        if not self.antialias and self.interpolation is not Interpolation.NEAREST:
            raise PreprocessError(
                f"antialias=False is not supported for {self.interpolation} resizing",
                hint="Pillow (and torchvision on PIL images) always antialiases; use antialias=true",
            )

    def check_crop_within_resize(self) -> None:
        """A PreprocessError when the centre crop is larger than the resized image, which it would pad with black
        (torchvision's CenterCrop does), where the resized size is known (a shorter side, or a height and width)."""
        if self.crop is None or self.resize is None or self.resize_mode is ResizeMode.BOUNDED:
            return
        crop = cast("tuple[int, int]", self.crop)
        if self.resize_mode is ResizeMode.SHORTER:
            side = cast(int, self.resize)
            if max(crop) <= side:
                return
            resized, fits = f"{side} (the shorter side)", f"resize={max(crop)},crop={_shown(crop)}"
        else:
            height, width = cast("tuple[int, int]", self.resize)
            if crop[0] <= height and crop[1] <= width:
                return
            resized, fits = f"{height}x{width}", f"crop={min(crop[0], height)}x{min(crop[1], width)}"
        raise PreprocessError(
            f"preprocess crop {_shown(crop)} is larger than the resize {resized}: the crop would be padded with black",
            hint=f"crop at most what the resize makes, e.g. {fits}",
        )

    @property
    def unnormalised(self) -> bool:
        """Pixels come out in [0, 1] as they are (mean 0, std 1: the model normalises them itself)."""
        return self.mean == (0.0, 0.0, 0.0) and self.std == (1.0, 1.0, 1.0) and abs(self.scale - 1 / 255) < 1e-12

    @property
    def output_hw(self) -> tuple[int, int] | None:
        """The (height, width) of every output, or None when it depends on the image (no crop, shorter-side)."""
        if self.crop is not None:
            return cast("tuple[int, int]", self.crop)  # __post_init__ makes every crop (height, width)
        return cast("tuple[int, int]", self.resize) if self.resize_mode is ResizeMode.EXACT else None

    def to_dict(self) -> JsonObject:
        """The fields as JSON values: tuples as lists, modes as their values."""
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v.value if isinstance(v, Enum) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: JsonObject) -> PreprocessSpec:
        if not isinstance(data, dict):
            raise PreprocessError(f"a preprocess spec is a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PreprocessError(
                f"unknown preprocess field(s): {', '.join(unknown)}", hint=f"known: {', '.join(sorted(known))}"
            )
        values: JsonObject = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**values)

    @classmethod
    def read(cls, path: Path) -> PreprocessSpec:
        """A JSON file holding `to_dict()`'s fields (missing ones take the defaults)."""
        data = read_json_object(path, "preprocess file", error=PreprocessError)
        try:
            return cls.from_dict(data)
        except PreprocessError as exc:
            raise PreprocessError(f"{path}: {exc.message}", hint=exc.hint) from None

    def write(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def parse(cls, text: str) -> PreprocessSpec:
        """`key=value` pairs separated by commas (`resize=256,crop=224,mean=0.485/0.456/0.406`), the fields of
        `to_dict()`, missing ones taking the defaults: sizes as `N` or `HxW`, three numbers with `/`, booleans
        `true`/`false`, `scale` a number or a fraction (`1/255`)."""
        defaults = {f.name: f.default for f in fields(cls)}
        values: JsonObject = {}
        for pair in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = (part.strip() for part in pair.partition("="))
            if not sep or key not in defaults:
                known = ", ".join(defaults)
                raise PreprocessError(
                    f"preprocess {pair!r}: expected key=value with a known key", hint=f"keys: {known}"
                )
            values[key] = _parsed(key, value, defaults[key])
        return cls.from_dict(values)

    @classmethod
    def from_option(cls, value: str) -> PreprocessSpec:
        """A command-line value: inline JSON (`{"resize": 256, "crop": 224}`), the path of a JSON file (`read`), else
        `key=value` pairs (`parse`); a UsageError naming --preprocess when it is not a spec, or crops more than its
        resize makes (a library's own config may, MobileViT's pads 224 to 256; typed by hand it is a slip)."""
        try:
            spec = cls._from_option(value)
            spec.check_crop_within_resize()
            return spec
        except PreprocessError as exc:
            said = exc.message.removeprefix("preprocess ")
            raise UsageError(f"--preprocess {said}", hint=exc.hint) from None

    @classmethod
    def _from_option(cls, value: str) -> PreprocessSpec:
        if value.lstrip().startswith("{"):
            try:
                data = json.loads(value)
            except json.JSONDecodeError as exc:
                raise PreprocessError(
                    f"preprocess {value!r}: not valid JSON ({exc.msg} at character {exc.pos})",
                    hint='quote it for the shell: --preprocess \'{"resize": 256, "crop": 224}\'',
                ) from None
            return cls.from_dict(data)
        return cls.read(Path(value)) if value.endswith(".json") or Path(value).is_file() else cls.parse(value)


def _parsed(key: str, text: str, default: Any) -> Any:
    """One `key=value` value, read as the field's default is typed (sizes: N or HxW; RGB triples: a/b/c)."""
    try:
        if key in ("resize", "crop"):
            if text.lower() == "none":
                return None
            sizes = [int(v) for v in text.lower().split("x")]
            return sizes[0] if len(sizes) == 1 else sizes
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if isinstance(default, tuple):
            return [float(v) for v in text.split("/")]
        if isinstance(default, float):
            numerator, _, denominator = text.partition("/")
            return float(numerator) / float(denominator or 1)
    except (ValueError, ZeroDivisionError):
        raise PreprocessError(
            f"preprocess {key}={text!r} is not a valid value",
            hint="sizes: N or HxW; mean/std: three numbers a/b/c; booleans: true or false; scale: e.g. 1/255",
        ) from None
    return text


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise PreprocessError(f"preprocess {name} {value!r} is not supported", hint=f"use one of {', '.join(allowed)}")


def _mode(name: str, value: Any, modes: type[Mode]) -> Mode:
    """`value` as a member of `modes` (a member, or its value as the manifest and `--preprocess` give it)."""
    _choice(name, value, tuple(modes))
    return modes(value)


def _size(name: str, value: Any, *, square: bool) -> tuple[int, ...]:
    """An int or a sequence of positive ints: (n,) for shorter-side sizes, (h, w) otherwise (an int is a square)."""
    items = [value] if isinstance(value, int) else list(value) if isinstance(value, (tuple, list)) else None
    if items and len(items) == 1 and square:
        items = items * 2
    wanted = 2 if square else 1
    if not items or len(items) != wanted or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in items):
        shape = "an int or [height, width]" if square else "one int (the shorter side)"
        raise PreprocessError(f"preprocess {name} must be {shape} of positive ints, got {value!r}")
    if max(items) > MAX_SIDE:
        raise PreprocessError(f"preprocess {name} {value!r} is larger than {MAX_SIDE:,} pixels a side")
    return tuple(items)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PreprocessError(f"preprocess {name} must hold finite numbers, got {value!r}")
    return float(value)


def _shown(size: tuple[int, int]) -> str:
    return f"{size[0]}" if size[0] == size[1] else f"{size[0]}x{size[1]}"
