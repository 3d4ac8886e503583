"""Real photographs without a network, in the numbers INT8 calibration asks for: the colour photos scikit-image's
wheel ships (astronaut, coffee, chelsea, rocket, ...) cut into seeded crops of many sizes and aspect ratios, some
mirrored, saved as JPEG like a folder of production images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

SOURCES = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "rocket.jpg",
    "motorcycle_left.png",
    "hubble_deep_field.jpg",
    "retina.jpg",
    "color.png",
    "ihc.png",
)


def source_photos() -> list[Path]:
    import skimage

    data = Path(skimage.__file__).parent / "data"
    return [data / name for name in SOURCES if (data / name).is_file()]


def photo_folder(folder: Path, count: int = 200, seed: int = 0) -> Path:
    """`count` JPEG crops of the bundled photos in `folder` (created), named in a stable order."""
    folder.mkdir(parents=True, exist_ok=True)
    photos = []
    for path in source_photos():
        with Image.open(path) as image:
            photos.append(image.convert("RGB"))
    rng = np.random.default_rng(seed)
    for index in range(count):
        photo = photos[index % len(photos)]
        width, height = photo.size
        side = int(min(width, height) * rng.uniform(0.35, 1.0))
        aspect = rng.uniform(0.75, 1.33)
        w, h = min(width, int(side * aspect)), min(height, side)
        left, top = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
        crop = photo.crop((left, top, left + w, top + h))
        if rng.random() < 0.5:
            crop = ImageOps.mirror(crop)
        crop.save(folder / f"photo_{index:04d}.jpg", quality=90)
    return folder
