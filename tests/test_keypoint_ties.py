"""Keypoint ties versus keypoints that really moved (`contract.keypoint_peaks`).

A keypoint is the argmax of an upsampled heatmap: where two peaks score within the numeric error of each other (a
keypoint head as initialised), or the box's side is a float error away from a whole pixel (the heatmap is resampled
on another grid), an artifact may place the keypoint elsewhere, faithfully. The eager reference records each
keypoint's runners-up; a move to one of them that scores within the measured error is a tie, counted and shown, and a
move anywhere else still fails."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torchvision.models.detection.roi_heads import heatmaps_to_keypoints

from modelship.checkpoint.families.torchvision_keypoints import heatmap_peaks
from modelship.contract.keypoint_peaks import PEAKS, KeypointPeaks
from modelship.contract.tensors import Tensors
from modelship.parity import Tolerance, compare_function
from tests.test_detection import _padded

TOLERANCE = Tolerance(atol=0, rtol=0, box_atol=2.0, score_atol=5e-3, score_margin=0.01, score_edge=0.05)
BOX = [10.0, 10.0, 60.0, 60.0]
TOP, RUNNER_UP = (20.0, 30.0), (45.0, 40.0)


def _answer(points: list[tuple[float, float]], scores: list[float]) -> Tensors:
    answer = _padded([BOX], [0.9], [1])
    answer["keypoints"] = np.zeros((1, 6, len(points), 3), np.float32)
    answer["keypoints"][0, 0, :, :2] = points
    answer["keypoints_scores"] = np.zeros((1, 6, len(points)), np.float32)
    answer["keypoints_scores"][0, 0] = scores
    return answer


def _reference(runner_up: float, grid_tie: bool = False) -> Tensors:
    """Keypoint 0 at TOP (heatmap 3.0) with a runner-up at RUNNER_UP scoring `runner_up`; keypoint 1 in place."""
    peaks = np.zeros((1, 2, PEAKS, 3))
    peaks[0, 0, 0], peaks[0, 0, 1] = (*TOP, 3.0), (*RUNNER_UP, runner_up)
    peaks[0, 1, 0] = (30.0, 30.0, 2.0)
    recorded = KeypointPeaks([peaks], [np.array([grid_tie])]).to_outputs(6)
    return _answer([TOP, (30.0, 30.0)], [3.0, 2.0]) | recorded


def _judge(reference: Tensors, moved_to: tuple[float, float], score: float = 3.0):
    candidate = _answer([moved_to, (30.0, 30.0)], [score, 2.00001])
    return compare_function("detections").compare("boxes", reference, candidate, TOLERANCE)


def test_a_keypoint_moved_to_a_tied_peak_is_a_tie() -> None:
    result = _judge(_reference(runner_up=2.99999), RUNNER_UP)
    assert result.passed and result.keypoint_ties == 1 and result.keypoint_diff == 0.0, result.failures
    assert result.figures()["keypoints"] == "0 px (+1 ties)"


@pytest.mark.parametrize(
    ("reference", "moved_to", "why"),
    [
        (_reference(runner_up=2.9), RUNNER_UP, "a runner-up scoring below the measured error"),
        (_reference(runner_up=2.99999), (50.0, 20.0), "a place the reference never scored high"),
        ({k: v for k, v in _reference(2.99999).items() if not k.startswith("~")}, RUNNER_UP, "no peaks recorded"),
    ],
)
def test_a_keypoint_that_really_moved_fails(reference: dict, moved_to: tuple[float, float], why: str) -> None:
    result = _judge(reference, moved_to)
    assert not result.passed and "matched keypoints move by up to" in result.failures[0], why


def test_a_box_on_a_grid_tie_may_move_its_keypoints() -> None:
    assert _judge(_reference(runner_up=1.0, grid_tie=True), (50.0, 20.0)).passed


def test_the_recorded_peaks_start_where_torchvision_places_the_keypoint() -> None:
    """The first peak is torchvision's keypoint and score; the runner-up is the other bump, more than the
    separation away."""
    torch.manual_seed(0)
    grid = torch.arange(56.0)

    def bump(y: float, x: float) -> torch.Tensor:
        return torch.exp(-((grid[:, None] - y) ** 2 + (grid[None, :] - x) ** 2) / 18)

    maps = torch.randn(3, 2, 56, 56) * 0.01 + 5.0 * bump(10, 12) + 4.9 * bump(40, 30)
    rois = torch.tensor([[5.0, 8.0, 100.0, 120.0], [0.0, 0.0, 30.5, 40.25], [12.0, 3.0, 90.3, 77.7]])
    peaks, grid_tie = heatmap_peaks(maps, rois, np.array([2.0, 2.0]))
    points, scores = heatmaps_to_keypoints(maps, rois)
    np.testing.assert_allclose(peaks[:, :, 0, :2], points[:, :, :2].numpy(), atol=1e-4)
    np.testing.assert_allclose(peaks[:, :, 0, 2], scores.numpy(), atol=1e-5)
    assert (np.abs(peaks[:, :, 1, :2] - peaks[:, :, 0, :2]).max(axis=-1) > 2.0).all()
    assert (peaks[:, :, 1, 2] > 4.5).all() and grid_tie.tolist() == [True, False, False]


def test_the_eager_reference_of_a_keypoint_rcnn_gives_its_peaks() -> None:
    """A Keypoint R-CNN with heads as initialised, small: the reference's outputs carry the peaks, the first of each
    where the keypoint is (in the input image's pixels, after the detector's resize), and judged against itself it
    passes with no tie."""
    from torchvision.models import detection

    from modelship.checkpoint.families.torchvision_detector import DetectorTensors
    from modelship.contract.iospec import IOSpec
    from modelship.parity import reference_runner

    torch.manual_seed(0)
    model = detection.keypointrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=2, min_size=128, max_size=160, box_score_thresh=0.0,
        box_detections_per_img=5,
    )  # fmt: skip
    io = IOSpec.from_dict(
        {
            "inputs": [{"name": "image", "shape": ["batch", 3, "height", "width"], "dtype": "float32"}],
            "outputs": [
                {"name": name, "shape": ["batch"], "dtype": "float32"}
                for name in ("boxes", "scores", "labels", "keypoints", "keypoints_scores", "num")
            ],
        }
    )
    image = {"image": np.random.default_rng(0).random((1, 3, 100, 140), dtype=np.float32)}
    outputs = reference_runner(DetectorTensors(model.eval()).eval(), io).run(image)
    count = int(outputs["num"][0])
    peaks = KeypointPeaks.from_outputs(outputs)
    assert count > 0 and peaks is not None
    np.testing.assert_allclose(peaks.peaks[0][:count, :, 0, :2], outputs["keypoints"][0, :count, :, :2], atol=1e-3)
    np.testing.assert_allclose(peaks.peaks[0][:count, :, 0, 2], outputs["keypoints_scores"][0, :count], atol=1e-4)
    same = compare_function("detections").compare("boxes", outputs, dict(outputs), TOLERANCE)
    assert same.passed and same.keypoint_ties == 0
