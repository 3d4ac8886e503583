"""Answers drawn on the photo (numpy + Pillow): a class mask as a colour overlay, a detector's boxes outlined and
labelled. For `modelship infer --save`; the server's models never draw."""

from __future__ import annotations

import numpy as np
from PIL import Image

from modelship.contract.errors import PreprocessError


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
