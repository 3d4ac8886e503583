"""`KeypointPeaks`: where else each keypoint of a Keypoint R-CNN's answer could have landed, per detection.

torchvision places a keypoint at the argmax of its heatmap, upsampled (bicubic) to the box's size rounded up to whole
pixels. Two kinds of tie decide that argmax by float error, so another runtime may place the keypoint elsewhere
without anything being wrong:

- a heatmap with two peaks that score within the numeric error of each other (an untrained keypoint head's maps are
  nearly flat);
- a box whose width or height lies within float error of a whole pixel: rounded up, the two runtimes resample the
  heatmap on grids one pixel apart (`grid_tie`).

The eager reference records, for each detection and keypoint, its heatmap's PEAKS best cells, each more than
SEPARATION pixels apart (x, y in the input image's pixels, and the heatmap's value), and the grid ties. They travel with
the reference's outputs as reference-only tensors (KEYS); the `detections` compare function counts a keypoint that
moved to another recorded peak scoring within the measured error of the first, or on a grid tie, as a tie."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from modelship.contract.tensors import Tensors

PEAKS = 4  # cells recorded per keypoint: the argmax and the runners-up
SEPARATION = 2.0  # input pixels (the fp32 keypoint bar) at least between recorded peaks
KEYS = ("~keypoint_peaks", "~keypoint_grid_tie")


@dataclass
class KeypointPeaks:
    peaks: list[np.ndarray]  # per image [detections, K, PEAKS, 3]: x, y (input image's pixels), heatmap value
    grid_tie: list[np.ndarray]  # per image [detections] bool

    def to_outputs(self, rows: int) -> Tensors:
        """As reference-only tensors padded to `rows` detections per image."""
        keypoints = next((p.shape[1] for p in self.peaks if p.ndim == 4), 0)
        peaks = np.zeros((len(self.peaks), rows, keypoints, PEAKS, 3), np.float32)
        ties = np.zeros((len(self.peaks), rows), np.bool_)
        for image, (found, tied) in enumerate(zip(self.peaks, self.grid_tie, strict=True)):
            peaks[image, : len(found)] = found
            ties[image, : len(tied)] = tied
        return dict(zip(KEYS, (peaks, ties), strict=True))

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, np.ndarray]) -> KeypointPeaks | None:
        """The peaks a reference gave with its outputs; None when it gave none (golden data of older exports, a
        served reference)."""
        if not all(key in outputs for key in KEYS):
            return None
        peaks, ties = (np.asarray(outputs[key]) for key in KEYS)
        return cls(list(peaks.astype(np.float64)), list(ties.astype(bool)))

    def image(self, index: int, rows: np.ndarray) -> KeypointPeaks:
        """The peaks of one image's detections `rows`, in that order."""
        return KeypointPeaks([self.peaks[index][rows]], [self.grid_tie[index][rows]])

    def tied(self, row: int, keypoint: int, moved_to: np.ndarray, bar: float, window: float) -> bool:
        """Whether the keypoint of detection `row` (of the first image) landing at `moved_to` (x, y) in another
        runtime is a tie: its box is on a grid tie, or a recorded runner-up within `bar` pixels of `moved_to` scores
        within `window` of the argmax."""
        if self.grid_tie[0][row]:
            return True
        found = self.peaks[0][row, keypoint]
        near = np.abs(found[1:, :2] - moved_to).max(axis=1) <= bar
        return bool((near & (found[0, 2] - found[1:, 2] <= window)).any())
