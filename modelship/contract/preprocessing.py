"""PreprocessSpec: everything needed to turn an image into a model input, as a typed, serialisable value.

The manifest stores `spec.to_dict()`; `PreprocessSpec.from_option(value)` reads what `--preprocess` is given: inline
JSON or a JSON file of those fields (`read`), or `key=value` pairs (`parse`, e.g. `resize=256,crop=224`).
Order of operations (torchvision's Resize -> CenterCrop -> ToTensor -> Normalize): resize, center crop, divide by
`1 / scale`, subtract `mean`, divide by `std` (mean/std in RGB order), reorder channels, lay out, cast.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, cast

from modelship.contract.errors import PreprocessError
from modelship.contract.jsonfile import JsonObject, read_json_object

# shorter: shorter side to `resize` (aspect kept); exact: to (height, width); bounded: `resize` is (shortest, longest):
# the shorter side to shortest unless the longer would pass longest (Hugging Face's shortest_edge + longest_edge)
RESIZE_MODES = ("shorter", "exact", "bounded")
INTERPOLATIONS = ("bilinear", "bicubic", "nearest")
# pillow: Pillow's resize (torchvision on PIL images, timm); torch: PyTorch's antialiased uint8 kernel (Hugging Face's
# image processors in transformers 5, torchvision v2 on uint8 tensors), which differs from Pillow by a level at times
RESAMPLERS = ("pillow", "torch")
CROP_OFFSETS = (
    "round",
    "floor",
)  # the centre crop's offset: round((size - crop) / 2), torchvision's; floor, transformers'
CHANNEL_ORDERS = ("RGB", "BGR")
LAYOUTS = ("NCHW", "NHWC")
DTYPES = ("float32", "float16")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class PreprocessSpec:
    """Resize, center-crop and normalize an RGB image.

    `resize` is the shorter side (an int) in "shorter" mode, `(height, width)` in "exact" mode, `(shortest,
    longest)` in "bounded" mode, or None for no resize. `crop` is the center crop `(height, width)` (an int means a
    square), or None. `antialias` must stay True for bilinear/bicubic: Pillow always antialiases when downscaling,
    as torchvision does on PIL images. `apply_exif` rotates/flips images by their EXIF orientation tag when they are
    loaded from files. `resampler` and `crop_offset` name whose rules the resize and the crop follow (RESAMPLERS,
    CROP_OFFSETS); `fused_normalize` computes `(x - mean / scale) / (std / scale)` in float32, as transformers'
    torchvision backend does, instead of `(x * scale - mean) / std` (the same to within float32 rounding).
    """

    resize: int | tuple[int, int] | None = 256
    crop: int | tuple[int, int] | None = 224
    resize_mode: str = "shorter"
    interpolation: str = "bilinear"
    antialias: bool = True
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    scale: float = 1 / 255
    channel_order: str = "RGB"
    layout: str = "NCHW"
    dtype: str = "float32"
    apply_exif: bool = True
    resampler: str = "pillow"
    crop_offset: str = "round"
    fused_normalize: bool = False

    def __post_init__(self) -> None:
        _choice("resize_mode", self.resize_mode, RESIZE_MODES)
        _choice("interpolation", self.interpolation, INTERPOLATIONS)
        _choice("resampler", self.resampler, RESAMPLERS)
        _choice("crop_offset", self.crop_offset, CROP_OFFSETS)
        if self.resampler == "torch" and self.interpolation == "nearest":
            raise PreprocessError(
                "the torch resampler takes bilinear or bicubic, not nearest",
                hint='use "resampler": "pillow" for nearest resizing',
            )
        _choice("channel_order", self.channel_order, CHANNEL_ORDERS)
        _choice("layout", self.layout, LAYOUTS)
        _choice("dtype", self.dtype, DTYPES)
        if self.resize is not None:
            if self.resize_mode == "shorter":
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
        if not self.antialias and self.interpolation != "nearest":
            raise PreprocessError(
                f"antialias=False is not supported for {self.interpolation} resizing",
                hint="Pillow (and torchvision on PIL images) always antialiases; use antialias=true",
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
        return cast("tuple[int, int]", self.resize) if self.resize_mode == "exact" else None

    def to_dict(self) -> JsonObject:
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

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
        `key=value` pairs (`parse`)."""
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


def _size(name: str, value: Any, *, square: bool) -> tuple[int, ...]:
    """An int or a sequence of positive ints: (n,) for shorter-side sizes, (h, w) otherwise (an int is a square)."""
    items = [value] if isinstance(value, int) else list(value) if isinstance(value, (tuple, list)) else None
    if items and len(items) == 1 and square:
        items = items * 2
    wanted = 2 if square else 1
    if not items or len(items) != wanted or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in items):
        shape = "an int or [height, width]" if square else "one int (the shorter side)"
        raise PreprocessError(f"preprocess {name} must be {shape} of positive ints, got {value!r}")
    return tuple(items)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PreprocessError(f"preprocess {name} must hold numbers, got {value!r}")
    return float(value)
