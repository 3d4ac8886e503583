"""Real photographs without a network, in the numbers INT8 calibration asks for: the colour photos scikit-image's
wheel ships (astronaut, coffee, chelsea, rocket, ...) cut into seeded crops of many sizes and aspect ratios, some
mirrored, saved as JPEG like a folder of production images; and crops of other photos, scikit-learn's (a temple in
China, a flower), for judging a model on photos its calibration never saw (`unseen_photo_folder`)."""

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


def unseen_photos() -> list[Path]:
    """scikit-learn's two sample photos: none of scikit-image's."""
    import sklearn.datasets

    images = Path(sklearn.datasets.__file__).parent / "images"
    return sorted(images.glob("*.jpg"))


def unseen_photo_folder(folder: Path, count: int = 80, seed: int = 1) -> Path:
    """`count` JPEG crops of photos `photo_folder` never cuts from (scikit-learn's), in `folder` (created)."""
    return photo_folder(folder, count, seed, unseen_photos())


def photo_folder(folder: Path, count: int = 200, seed: int = 0, sources: list[Path] | None = None) -> Path:
    """`count` JPEG crops of the bundled photos (or of `sources`) in `folder` (created), named in a stable order."""
    folder.mkdir(parents=True, exist_ok=True)
    photos = []
    for path in source_photos() if sources is None else sources:
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
