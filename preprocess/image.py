"""The one preprocessing implementation (numpy + Pillow): decode, orient, convert to RGB, resize, crop, normalize.

It reproduces torchvision's `Resize(size) -> CenterCrop(crop) -> ToTensor() -> Normalize(mean, std)` on PIL images
bit for bit by copying its rules: the long side is `int(size * long / short)` (truncated), the crop offset is
`round((size - crop) / 2)`, a crop larger than the image pads with zeros first, the resize is Pillow's own
(antialiased) filter, and the arithmetic is float32 in the same order (x / 255, then (x - mean) / std).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from modelship.contract.errors import PreprocessError
from modelship.contract.preprocessing import (
    ChannelOrder,
    CropOffset,
    Interpolation,
    Layout,
    PreprocessSpec,
    Resampler,
    ResizeMode,
)
from modelship.preprocess.resample import resize_uint8

PIL_FILTERS = {
    Interpolation.BILINEAR: Image.Resampling.BILINEAR,
    Interpolation.BICUBIC: Image.Resampling.BICUBIC,
    Interpolation.NEAREST: Image.Resampling.NEAREST,
}
SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")
ImageSource = str | Path | Image.Image


def load_image(path: str | Path, *, apply_exif: bool = True) -> Image.Image:
    """Decode an image file into an RGB PIL image (EXIF orientation applied unless `apply_exif=False`)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PreprocessError(f"{path}: image file not found") from None
    except OSError as exc:
        raise PreprocessError(f"{path}: cannot read image ({exc.strerror or exc})") from None
    return decode_image(data, apply_exif=apply_exif, source=str(path))


def decode_image(
    data: bytes, *, apply_exif: bool = True, max_pixels: int | None = None, source: str = "image"
) -> Image.Image:
    """Decode encoded image bytes (JPEG, PNG, WebP, BMP, GIF, TIFF; 8- or 16-bit, gray, RGBA) into an RGB PIL image,
    EXIF orientation applied unless `apply_exif=False`. A PreprocessError names the cause: empty data, not an image,
    truncated or corrupt data, or more than `max_pixels` pixels (checked from the header, before decoding: a
    decompression bomb never allocates its pixels)."""
    if not data:
        raise PreprocessError(f"{source}: no image data (0 bytes)", hint="send the encoded image file's bytes")
    try:
        with Image.open(io.BytesIO(data)) as opened:
            width, height = opened.size
            if max_pixels is not None and width * height > max_pixels:
                raise PreprocessError(
                    f"{source}: {width}x{height} image has {width * height} pixels, over the limit of {max_pixels}",
                    hint="send a smaller image (or raise the model's max_pixels parameter)",
                )
            opened.load()
            image = ImageOps.exif_transpose(opened) if apply_exif else opened.copy()
    except UnidentifiedImageError:
        hint = "use JPEG, PNG, BMP, GIF, TIFF or WebP"
        raise PreprocessError(f"{source}: not an image Pillow can read", hint=hint) from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise PreprocessError(f"{source}: cannot decode image, truncated or corrupt ({exc})") from None
    return to_rgb(image, source=source)


def to_rgb(image: Image.Image, *, source: str = "image") -> Image.Image:
    """8-bit RGB. Like torchvision's `pil_loader` this is `image.convert("RGB")` (alpha dropped, palette expanded,
    gray replicated), except for 16-bit images, which are scaled to 8 bits (value / 257, rounded) instead of being
    clipped at 255 by Pillow's conversion."""
    if image.mode == "RGB":
        return image
    if image.mode in SIXTEEN_BIT_MODES:
        values = np.asarray(image, dtype=np.float64)
        if values.min() < 0 or values.max() > 65535:
            raise PreprocessError(f"{source}: {image.mode} image with values outside 0..65535 is not supported")
        image = Image.fromarray(np.rint(values / 257.0).astype(np.uint8))
    elif image.mode == "F":
        raise PreprocessError(f"{source}: floating-point (mode F) images are not supported", hint="save it as 8-bit")
    return image.convert("RGB")


def transform(image: Image.Image, spec: PreprocessSpec) -> np.ndarray:
    """One image -> one (C, H, W) or (H, W, C) array, per `spec`. The image is converted to RGB first."""
    pixels = _resize(to_rgb(image), spec)
    if spec.crop is not None:
        crop = cast("tuple[int, int]", spec.crop)  # PreprocessSpec makes every crop (height, width)
        pixels = center_crop(pixels, crop, floor=spec.crop_offset is CropOffset.FLOOR)
    values = _normalize(pixels.astype(np.float32), spec)
    if spec.channel_order is ChannelOrder.BGR:
        values = values[..., ::-1]
    if spec.layout is Layout.NCHW:
        values = values.transpose(2, 0, 1)
    return np.ascontiguousarray(values, dtype=np.dtype(spec.dtype))


def _normalize(values: np.ndarray, spec: PreprocessSpec) -> np.ndarray:
    """Rescale and normalise float32 pixels in the spec's order of float32 operations."""
    mean, std = np.asarray(spec.mean, np.float32), np.asarray(spec.std, np.float32)
    divisor = np.float32(1.0 / spec.scale)
    if spec.fused_normalize:
        return (values - mean * divisor) / (std * divisor)
    return (values / divisor - mean) / std


def preprocess_images(sources: Sequence[ImageSource], spec: PreprocessSpec) -> np.ndarray:
    """A batch (N, ...) from image files and/or PIL images; every output must have the same size (give a crop)."""
    if not sources:
        raise PreprocessError("no images to preprocess")
    arrays = []
    for source in sources:
        if isinstance(source, Image.Image):
            arrays.append(transform(source, spec))
        else:
            arrays.append(transform(load_image(source, apply_exif=spec.apply_exif), spec))
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise PreprocessError(
            f"images preprocess to different shapes {sorted(shapes)}", hint="set a crop size in the preprocess spec"
        )
    return np.stack(arrays)


def check_one_size(sizes: Sequence[tuple[int, int]], spec: PreprocessSpec, *, originals: bool = False) -> None:
    """Images of these (height, width) sizes make one batch: their preprocessed sizes agree (always, with a crop)
    and, with `originals` (answers mapped back to the images), so do their own. A PreprocessError names two that
    differ."""
    if spec.output_hw is not None and not originals:
        return
    shapes = [tuple(size) if originals else resized_size(*size, spec) for size in sizes]
    different = sorted(set(shapes))
    if len(different) > 1:
        first, second = (f"{h}x{w}" for h, w in different[:2])
        raise PreprocessError(
            f"the images of one request must share their size (this model takes each image at its own): "
            f"got {first} and {second}",
            hint="send images of different sizes in separate requests",
        )


def image_files(folder: Path) -> list[Path]:
    """The image files directly in `folder` (by extension), sorted by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PreprocessError(f"{folder}: not a folder of images")
    suffixes = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in suffixes and p.is_file())
    if not files:
        raise PreprocessError(f"{folder}: no image files here", hint=f"expected one of {', '.join(sorted(suffixes))}")
    return files


def resized_size(height: int, width: int, spec: PreprocessSpec) -> tuple[int, int]:
    """torchvision's output size: shorter side to `resize`, long side `int(resize * long / short)`."""
    if spec.resize is None:
        return height, width
    if spec.resize_mode is ResizeMode.EXACT:
        return cast("tuple[int, int]", spec.resize)  # PreprocessSpec makes it (height, width) in exact mode
    if spec.resize_mode is ResizeMode.BOUNDED:
        return bounded_size(height, width, *cast("tuple[int, int]", spec.resize))  # (shortest, longest)
    short, long = (width, height) if width <= height else (height, width)
    resize = cast(int, spec.resize)  # PreprocessSpec makes it one int (the shorter side) in shorter mode
    new_short, new_long = resize, int(resize * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def box_scale(height: int, width: int, spec: PreprocessSpec) -> np.ndarray:
    """`[x, y, x, y]` float32 factors from the resized image's pixels (what a detector fed by `spec` answers in) to
    the original image's (`height` x `width`)."""
    new_height, new_width = resized_size(int(height), int(width), spec)
    x, y = width / new_width, height / new_height
    return np.array([x, y, x, y], dtype=np.float32)


def bounded_size(height: int, width: int, shortest: int, longest: int) -> tuple[int, int]:
    """Hugging Face's `get_size_with_aspect_ratio`: the shorter side to `shortest`, unless the longer would then pass
    `longest` (the shorter side is then `round(longest * short / long)`); the other side truncated."""
    short, long = float(min(height, width)), float(max(height, width))
    size, raw = shortest, None
    if long / short * shortest > longest:
        raw = longest * short / long
        size = round(raw)
    if (height <= width and height == size) or (width <= height and width == size):
        return height, width
    scale = raw if raw is not None else size
    if width < height:
        return int(scale * height / width), size
    return size, int(scale * width / height)


def center_crop(pixels: np.ndarray, size: tuple[int, int], *, floor: bool = False) -> np.ndarray:
    """torchvision's center_crop on an (H, W, C) array: pad with zeros when too small, offsets by round() (by
    floor with `floor`, as transformers' image processors crop)."""
    crop_h, crop_w = size
    height, width = pixels.shape[:2]
    if crop_h > height or crop_w > width:
        top, left = max(crop_h - height, 0) // 2, max(crop_w - width, 0) // 2
        bottom, right = (max(crop_h - height, 0) + 1) // 2, (max(crop_w - width, 0) + 1) // 2
        pixels = np.pad(pixels, ((top, bottom), (left, right), (0, 0)))
        height, width = pixels.shape[:2]
    offset = (lambda extra: extra // 2) if floor else (lambda extra: round(extra / 2.0))  # round: half to even
    top, left = offset(height - crop_h), offset(width - crop_w)
    return pixels[top : top + crop_h, left : left + crop_w]


def _resize(image: Image.Image, spec: PreprocessSpec) -> np.ndarray:
    """The resized (H, W, 3) uint8 pixels, by the spec's resampler."""
    height, width = resized_size(image.height, image.width, spec)
    if (height, width) == (image.height, image.width):
        return np.asarray(image, dtype=np.uint8)
    if spec.resampler is Resampler.TORCH:
        return resize_uint8(np.asarray(image, dtype=np.uint8), height, width, spec.interpolation)
    return np.asarray(image.resize((width, height), PIL_FILTERS[spec.interpolation]), dtype=np.uint8)
