"""Recording a Keypoint R-CNN's heatmap peaks while the eager reference runs (`contract.keypoint_peaks`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional

from modelship.checkpoint.families.torchvision_recording import patched, recording_scales
from modelship.contract.keypoint_peaks import PEAKS, SEPARATION, KeypointPeaks

if TYPE_CHECKING:
    from modelship.checkpoint.families.torchvision_detector import DetectorTensors

GRID_TIE = 1e-3  # px: a box side this close to a whole pixel may round up either way


def has_keypoints(model: DetectorTensors) -> bool:
    return getattr(model.detector.roi_heads, "keypoint_predictor", None) is not None


@contextmanager
def recording_keypoint_peaks(
    model: DetectorTensors, separation: float = SEPARATION
) -> Iterator[Callable[[], KeypointPeaks]]:
    """Record each final detection's keypoint heatmap peaks (`heatmap_peaks`, runners-up at least `separation`
    input pixels from a better one) while the detector runs; yields the function giving the last run's."""
    from torchvision.models.detection import roi_heads

    found: list[tuple[Tensor, Tensor]] = []
    inference = roi_heads.keypointrcnn_inference

    def recording(maps: Tensor, boxes: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        found[:] = list(zip(maps.split([len(b) for b in boxes]), boxes, strict=True))
        return inference(maps, boxes)

    with patched(roi_heads, "keypointrcnn_inference", recording), recording_scales(model) as scales:

        def peaks() -> KeypointPeaks:
            per_image = []
            for (maps, rois), scale in zip(found, scales(), strict=True):
                located, tied = heatmap_peaks(maps, rois, separation / scale)
                per_image.append((located * np.array([*scale, 1.0]), tied))
            return KeypointPeaks([p for p, _ in per_image], [t for _, t in per_image])

        yield peaks


@torch.no_grad()
def heatmap_peaks(maps: Tensor, rois: Tensor, separation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[detections, K, PEAKS, 3] (x, y in the detector's resized pixels, value) of each keypoint's heatmap as
    torchvision's `heatmaps_to_keypoints` upsamples it, the best cell first and each next the best one farther than
    `separation` (x, y) pixels from those before; and [detections] whether the box's width or height is on a grid
    tie (GRID_TIE)."""
    count, keypoints = maps.shape[:2]
    peaks = np.zeros((count, keypoints, PEAKS, 3), np.float64)
    sides = (rois[:, 2:] - rois[:, :2]).clamp(min=1).double()
    grid_tie = ((sides - sides.round()).abs() <= GRID_TIE).any(dim=1) & (sides > 1).all(dim=1)
    for i in range(count):
        width, height = sides[i].tolist()
        cols, rows = int(np.ceil(width)), int(np.ceil(height))
        heat = functional.interpolate(maps[i][:, None], size=(rows, cols), mode="bicubic", align_corners=False)[:, 0]
        x_pixel, y_pixel = width / cols, height / rows
        xs = (torch.arange(cols, dtype=torch.float64) + 0.5) * x_pixel
        ys = (torch.arange(rows, dtype=torch.float64) + 0.5) * y_pixel
        heat = heat.double()
        for k in range(keypoints):
            values = heat[k].clone()
            for m in range(PEAKS):
                best = int(values.argmax())
                y, x = divmod(best, cols)
                peaks[i, k, m] = (xs[x] + float(rois[i, 0]), ys[y] + float(rois[i, 1]), float(heat[k, y, x]))
                near_y = (ys - ys[y]).abs() <= separation[1]
                near_x = (xs - xs[x]).abs() <= separation[0]
                values[near_y[:, None] & near_x[None, :]] = -torch.inf
    return peaks, grid_tie.numpy()
