"""Recording what a torchvision detector computes while its eager reference runs: the sizes it resized each image
to (`recording_scales`), read by the candidate pool (torchvision_detector) and the keypoint peaks
(torchvision_keypoints), and the one way a library function is swapped for a recording one (`patched`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from modelship.checkpoint.families.torchvision_detector import DetectorTensors


@contextmanager
def recording_scales(model: DetectorTensors) -> Iterator[Callable[[], list[np.ndarray]]]:
    """Record the sizes the detector resized its last run's images to; yields the function giving, per image, the
    (x, y) factors from those pixels back to the input image's."""
    detector = model.detector
    sizes: list[tuple[list, list]] = []
    postprocess = detector.transform.postprocess

    def recording_postprocess(result: Any, image_shapes: list, original_sizes: list) -> Any:
        sizes.append((list(image_shapes), list(original_sizes)))
        return postprocess(result, image_shapes, original_sizes)

    def scales() -> list[np.ndarray]:
        resized, original = sizes[-1]
        return [np.array([w / rw, h / rh]) for (rh, rw), (h, w) in zip(resized, original, strict=True)]

    detector.transform.postprocess = recording_postprocess
    try:
        yield scales
    finally:
        del detector.transform.postprocess


@contextmanager
def patched(owner: Any, name: str, value: Callable) -> Iterator[None]:
    """`owner.name` set to `value` while the block runs, put back afterwards."""
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)
