"""The way back from a model's outputs to the photo it was given (numpy only), shared by modelship's client and the
`<name>_postprocess` model a segmentation pipeline runs in Triton: class scores become a class mask of the original
image's size, a mask becomes each class's share of the image. Drawing them on the photo: modelship.drawing."""

from __future__ import annotations

import numpy as np

from modelship.contract.errors import PreprocessError

MASK_ROWS = 64  # photo rows resized and argmaxed at a time: a 12-megapixel photo's scores never exist whole


def class_mask(scores: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """[classes, h, w] scores -> the [height, width] mask of class indices at `size` (the original image's), as
    transformers' `post_process_semantic_segmentation` computes it: the scores resized to `size` once, bilinearly
    with corners not aligned and no antialiasing (PyTorch's `interpolate`, in float32), then the best class per
    pixel. uint8 for up to 256 classes, else int32."""
    if scores.ndim != 3:
        raise PreprocessError(f"class scores must be [classes, height, width], got shape {list(scores.shape)}")
    height, width = (int(v) for v in size)
    if height < 1 or width < 1:
        raise PreprocessError(f"a mask needs a positive size, got {height}x{width}")
    scores = np.asarray(scores, dtype=np.float32)
    top, bottom, row_weight = _linear_taps(scores.shape[1], height)
    left, right, column_weight = _linear_taps(scores.shape[2], width)
    mask = np.empty((height, width), dtype=mask_dtype(scores.shape[0]))
    for start in range(0, height, MASK_ROWS):
        rows = slice(start, start + MASK_ROWS)
        upper, lower = scores[:, top[rows]], scores[:, bottom[rows]]  # [classes, rows, w]
        across = [r[..., left] * (1 - column_weight) + r[..., right] * column_weight for r in (upper, lower)]
        weight = row_weight[rows, None]
        mask[rows] = (across[0] * (1 - weight) + across[1] * weight).argmax(axis=0)
    return mask


def _linear_taps(source: int, target: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of `target` output positions: the two source positions it reads and the second's weight, as
    PyTorch's bilinear kernel computes them in float32 (source = (i + 0.5) * source/target - 0.5, at least 0)."""
    scale = np.float32(source) / np.float32(target)
    position = np.maximum(scale * (np.arange(target, dtype=np.float32) + np.float32(0.5)) - np.float32(0.5), 0)
    first = np.minimum(position.astype(np.int64), source - 1)
    second = np.minimum(first + 1, source - 1)
    weight: np.ndarray = np.clip(position - first.astype(np.float32), 0, 1).astype(np.float32)
    return first, second, weight


def mask_dtype(classes: int) -> np.dtype:
    """The smallest type that holds every class index."""
    return np.dtype(np.uint8 if classes <= 256 else np.int32)


def class_shares(mask: np.ndarray, classes: int) -> np.ndarray:
    """The share of the image's pixels each class covers, [classes], summing to 1."""
    counts = np.bincount(mask.reshape(-1).astype(np.int64), minlength=classes)[:classes]
    return counts / max(mask.size, 1)
