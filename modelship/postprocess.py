"""The way back from a model's outputs to the photo it was given (numpy + Pillow, no torch), shared by modelship's
client and the `<name>_postprocess` model a segmentation pipeline runs in Triton: class scores become a class mask
of the original image's size, a mask becomes each class's share of the image and a colour overlay."""

from __future__ import annotations

import numpy as np
from PIL import Image

from modelship.contract.errors import PreprocessError


def class_mask(scores: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """[classes, h, w] scores -> the [height, width] mask of class indices at `size` (the original image's):
    the best class per pixel, then nearest-neighbour scaling (a pixel takes the class of the score cell it falls
    in). uint8 for up to 256 classes, else int32."""
    if scores.ndim != 3:
        raise PreprocessError(f"class scores must be [classes, height, width], got shape {list(scores.shape)}")
    height, width = (int(v) for v in size)
    if height < 1 or width < 1:
        raise PreprocessError(f"a mask needs a positive size, got {height}x{width}")
    best = scores.argmax(axis=0).astype(mask_dtype(scores.shape[0]), copy=False)
    rows = ((np.arange(height) + 0.5) * best.shape[0] / height).astype(np.int64)
    cols = ((np.arange(width) + 0.5) * best.shape[1] / width).astype(np.int64)
    return best[rows[:, None], cols[None, :]]


def mask_dtype(classes: int) -> np.dtype:
    """The smallest type that holds every class index."""
    return np.dtype(np.uint8 if classes <= 256 else np.int32)


def class_shares(mask: np.ndarray, classes: int) -> np.ndarray:
    """The share of the image's pixels each class covers, [classes], summing to 1."""
    counts = np.bincount(mask.reshape(-1).astype(np.int64), minlength=classes)[:classes]
    return counts / max(mask.size, 1)


def palette(classes: int) -> np.ndarray:
    """One distinct RGB colour per class (PASCAL VOC's bit-interleaved palette; class 0, background, is black)."""
    index = np.arange(classes)
    colours = np.zeros((classes, 3), dtype=np.int64)
    for bit in range(8):
        for channel in range(3):
            colours[:, channel] |= ((index >> (3 * bit + channel)) & 1) << (7 - bit)
    return colours.astype(np.uint8)


def overlay(image: Image.Image, mask: np.ndarray, classes: int, alpha: float = 0.5) -> Image.Image:
    """The photo with every pixel tinted by its class's colour (background left as it is)."""
    if mask.shape != (image.height, image.width):
        raise PreprocessError(f"mask {list(mask.shape)} is not the image's size {image.height}x{image.width}")
    pixels = np.asarray(image.convert("RGB"), dtype=np.float32)
    tinted = pixels * (1 - alpha) + palette(classes)[mask].astype(np.float32) * alpha
    blended = np.where((mask > 0)[..., None], tinted, pixels)
    return Image.fromarray(np.clip(np.rint(blended), 0, 255).astype(np.uint8))


def draw_boxes(image: Image.Image, boxes: np.ndarray, labels: list[str], classes: np.ndarray) -> Image.Image:
    """The photo with each box ([n, 4] x1, y1, x2, y2 in its pixels) outlined in its class's colour and labelled."""
    from PIL import ImageDraw

    drawn = image.convert("RGB")
    draw = ImageDraw.Draw(drawn)
    colours = palette(int(classes.max()) + 2 if len(classes) else 1)
    for box, label, cls in zip(boxes.tolist(), labels, classes.tolist(), strict=True):
        colour = tuple(int(c) for c in colours[cls + 1])  # + 1: class 0 keeps a visible colour
        draw.rectangle(box, outline=colour, width=max(1, round(min(drawn.size) / 200)))
        draw.text((box[0] + 2, box[1] + 1), label, fill=colour)
    return drawn
