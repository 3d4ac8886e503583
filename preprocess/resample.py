"""PyTorch's antialiased uint8 resize, in numpy: what Hugging Face's image processors (transformers 5's default
torchvision backend) and torchvision v2 apply to uint8 tensors on CPU, reproduced bit for bit.

The kernel (ATen's `upsample_avx_bilinear_bicubic_uint8`, after Pillow-SIMD) differs from Pillow's own resize by one
level on some pixels: its weights are rounded to 16-bit integers at a precision chosen per axis, where Pillow keeps
22 bits. The rules copied here:

- per output index: centre `scale * (i + 0.5)`, taps `[int(centre - support + 0.5), int(centre + support + 0.5))`
  clipped to the input, filter weights (triangle for bilinear; Keys cubic with a = -0.5 for bicubic) at
  `(tap - centre + 0.5) / scale` when downscaling, normalised to sum 1, all in float64;
- the axis's precision: the most bits (at most 22) at which the largest weight times 2**(bits + 1) stays below 2**15;
  weights scaled by 2**bits and rounded half away from zero;
- each pass: sum of pixel x weight, plus 2**(bits - 1), shifted right by bits, clipped to 0..255; the horizontal pass
  first, then the vertical one, each only when that side changes.
"""

from __future__ import annotations

import numpy as np

from modelship.contract.preprocessing import Interpolation

TAPS = {Interpolation.BILINEAR: 2, Interpolation.BICUBIC: 4}  # the filter's support, in input pixels at scale 1
CUBIC_A = -0.5  # Pillow's and PyTorch's antialiasing cubic
MAX_PRECISION = 22


def resize_uint8(pixels: np.ndarray, height: int, width: int, interpolation: Interpolation) -> np.ndarray:
    """An (H, W, C) uint8 array resized to (height, width) as `torch.nn.functional.interpolate(..., antialias=True)`
    resizes a uint8 tensor (bilinear or bicubic)."""
    if pixels.shape[1] != width:
        pixels = _resize_axis(pixels, 1, width, interpolation)
    if pixels.shape[0] != height:
        pixels = _resize_axis(pixels, 0, height, interpolation)
    return pixels


def _resize_axis(pixels: np.ndarray, axis: int, size: int, interpolation: Interpolation) -> np.ndarray:
    indexes, weights, precision = axis_weights(pixels.shape[axis], size, interpolation)
    total = np.full((*pixels.shape[:axis], size, *pixels.shape[axis + 1 :]), 1 << (precision - 1), np.int32)
    shape = (1, size, 1) if axis == 1 else (size, 1, 1)
    for tap in range(indexes.shape[1]):
        taken = np.take(pixels, indexes[:, tap], axis=axis).astype(np.int32)
        total += taken * weights[:, tap].reshape(shape)
    return np.clip(total >> precision, 0, 255).astype(np.uint8)


def axis_weights(source: int, size: int, interpolation: Interpolation) -> tuple[np.ndarray, np.ndarray, int]:
    """For each of `size` outputs: the input indexes it reads (clipped; unused taps weigh 0), their int16 weights,
    and the number of fraction bits those weights carry."""
    scale = source / size
    support = TAPS[interpolation] * 0.5 * max(scale, 1.0)
    inverse = 1.0 / scale if scale >= 1.0 else 1.0
    taps = int(np.ceil(support)) * 2 + 1
    centre = scale * (np.arange(size, dtype=np.float64) + 0.5)
    first = np.maximum((centre - support + 0.5).astype(np.int64), 0)
    count = np.clip(np.minimum((centre + support + 0.5).astype(np.int64), source) - first, 0, taps)
    offsets = np.arange(taps)
    weights = _filter(interpolation, (offsets + first[:, None] - centre[:, None] + 0.5) * inverse)
    weights = np.where(offsets < count[:, None], weights, 0.0)
    sums = weights.sum(axis=1, keepdims=True)
    weights = np.divide(weights, sums, out=weights, where=sums != 0.0)
    precision = _precision(float(weights.max()))
    scaled = weights * (1 << precision)
    rounded = np.where(scaled < 0.0, scaled - 0.5, scaled + 0.5).astype(np.int32)  # C's cast truncates
    return np.minimum(first[:, None] + offsets, source - 1), rounded, precision


def _precision(largest: float) -> int:
    bits = 0
    while bits < MAX_PRECISION and int(0.5 + largest * (1 << (bits + 1))) < (1 << 15):
        bits += 1
    return bits


def _filter(interpolation: Interpolation, x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    if interpolation is Interpolation.BILINEAR:
        return np.where(x < 1.0, 1.0 - x, 0.0)
    a = CUBIC_A
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))
