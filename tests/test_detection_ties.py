"""Tie flips versus real differences in a detector's verdict.

NMS, the top-k and the count cut are discrete decisions on continuous scores: where two overlapping boxes score
alike (heads that have not learned yet, the long tail of low scores), a faithful artifact may keep the one eager
PyTorch dropped. The reference's candidate pool (every box that entered its final NMS) tells that apart from a box
that moved: a tie flip is counted and shown, a broken box decoding or resize still fails. Localisation compares each
module's own output on the same call, and not what runs on NMS's selection."""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from torchvision.models import detection

from modelship.checkpoint.families.torchvision_detector import DetectorTensors
from modelship.checkpoint.loader import LoadOptions, load_model
from modelship.contract.candidate_pool import CandidatePool
from modelship.contract.iospec import IOSpec
from modelship.contract.manifest import Manifest
from modelship.contract.tensors import Tensors
from modelship.parity import Tolerance, TorchRunner, compare_function, compare_runners, reference_runner
from modelship.parity.localize import localize_onnx
from modelship.parity.tolerance import ToleranceConfig
from tests.test_detection import CLASSES, RPN_ALL, _padded

TOLERANCE = Tolerance(atol=0, rtol=0, box_atol=2.0, score_atol=5e-3, score_margin=0.01, score_edge=0.05)
A, B = [10.0, 10.0, 60.0, 60.0], [14.0, 12.0, 66.0, 62.0]  # IoU 0.75: NMS (0.5) keeps one of them
OTHER = [100.0, 100.0, 150.0, 140.0]
MASKS = replace(TOLERANCE, min_mask_iou=0.99)


def _with_pool(answer: Tensors, boxes: list[list[float]], scores: list[float]) -> Tensors:
    pool = CandidatePool([np.array(boxes)], [np.array(scores)], [np.ones(len(boxes), np.int64)], 0.5)
    return answer | pool.to_outputs()


def test_a_tie_resolved_the_other_way_is_a_tie_flip_not_a_move() -> None:
    """Eager kept A (0.6000001) over B (0.6); the artifact kept B: the one-to-one matcher pairs A with B, a 6 px
    'move' that failed the verdict before the pool."""
    compare = compare_function("detections").compare
    reference = _with_pool(_padded([A, OTHER], [0.6000001, 0.9], [1, 1]), [A, B, OTHER], [0.6000001, 0.6, 0.9])
    flipped = _padded([B, OTHER], [0.6000002, 0.9], [1, 1])
    result = compare("boxes", reference, flipped, TOLERANCE)
    assert result.passed and result.tie_flips == 2 and result.matched == 1, result.failures
    assert "2 tie flips" in result.summary() and "+2 tie flips" in result.figures()["unmatched"]
    plain = {k: v for k, v in reference.items() if not k.startswith("~")}  # no pool: nothing is a tie
    assert "move by up to 6 px" in compare("boxes", plain, flipped, TOLERANCE).failures[0]


@pytest.mark.parametrize(
    ("boxes", "scores", "why"),
    [
        ([[b + 5 for b in B], OTHER], [0.6000002, 0.9], "a box the reference never scored (broken decoding)"),
        ([B, OTHER], [0.59, 0.9], "the same box at another score (beyond the measured error)"),
        ([A, B, OTHER], [0.6000001, 0.6, 0.9], "both kept, though they overlap past the NMS threshold"),
    ],
)
def test_a_difference_the_pool_does_not_explain_fails(boxes: list, scores: list, why: str) -> None:
    compare = compare_function("detections").compare
    reference = _with_pool(_padded([A, OTHER], [0.6000001, 0.9], [1, 1]), [A, B, OTHER], [0.6000001, 0.6, 0.9])
    result = compare("boxes", reference, _padded(boxes, scores, [1] * len(boxes)), TOLERANCE)
    assert not result.passed, why


def test_a_box_replaced_by_a_neighbour_from_a_tied_proposal_is_a_tie_flip() -> None:
    """A two-stage detector's RPN ranks proposals on near-tied objectness: the artifact kept B's proposal, whose
    box scores lower than A, where eager kept A's. A is explained when the box that took its place is one the
    reference scored (in its pool) at its score; not when that box is one it never scored."""
    compare = compare_function("detections").compare
    reference = _with_pool(_padded([A, OTHER], [0.093, 0.9], [1, 1]), [A, B, OTHER], [0.093, 0.08, 0.9])
    replaced = compare("boxes", reference, _padded([B, OTHER], [0.08, 0.9], [1, 1]), TOLERANCE)
    assert replaced.passed and replaced.tie_flips == 2, replaced.failures
    moved = compare("boxes", reference, _padded([[b + 5 for b in B], OTHER], [0.08, 0.9], [1, 1]), TOLERANCE)
    assert not moved.passed


def test_a_mask_pasted_a_pixel_over_is_a_tie_only_where_its_corner_rounds_either_way() -> None:
    """torchvision pastes a mask into its box widened by 30/28, corners truncated to whole pixels: box x 4.5..18.5
    widens to 4.0..19.0, where float error truncates to 3 or 4, and the whole mask is resampled one pixel over. The
    same difference on a box whose corners are nowhere near a whole pixel is a real one."""
    compare = compare_function("detections").compare

    def pasted(box: list[float], left: int) -> Tensors:
        answer = _padded([box, OTHER], [0.9, 0.8], [1, 1], rows=2)
        masks = np.zeros((1, 2, 1, 16, 32), np.float32)
        masks[0, 0, 0, 2:10, left:19] = 0.65  # an untrained head: the whole region is in the mask
        return answer | {"masks": masks}

    for box, tie in (([4.5, 2.3, 18.5, 9.9], True), ([4.7, 2.3, 18.3, 9.9], False)):
        result = compare("boxes", pasted(box, 4), pasted(box, 5), MASKS)
        assert result.passed is tie and (result.mask_iou == 1.0) is tie, (box, result.mask_iou)


def test_mask_pixels_at_the_threshold_are_ties_and_a_moved_mask_still_fails() -> None:
    """An untrained mask head answers about 0.5 everywhere: pixels whose probability moved within the score bar
    but crossed 0.5 are ties; a mask whose probabilities moved beyond it (a shifted paste) still fails."""
    compare = compare_function("detections").compare
    reference = _padded([A, OTHER], [0.9, 0.8], [1, 1], rows=3)
    masks = np.full((1, 3, 1, 16, 16), 0.5 + 1e-4, np.float32)
    reference |= {"masks": masks}
    noisy = {k: v.copy() for k, v in reference.items()}
    noisy["masks"][0, :2, 0, :, :5] = 0.5 - 1e-4  # a third of the pixels flip on 2e-4 of float noise
    tied = compare("boxes", reference, noisy, MASKS)
    assert tied.passed and tied.mask_iou == 1.0, tied.failures
    moved = {k: v.copy() for k, v in reference.items()}
    moved["masks"][0, 1, 0, :, :5] = 0.2
    result = compare("boxes", reference, moved, MASKS)
    assert not result.passed and result.mask_iou == pytest.approx(11 / 16)


@pytest.fixture(scope="module")
def ssdlite() -> DetectorTensors:
    """An SSDlite whose backbone is calibrated and whose heads are as initialised (an early training checkpoint)."""
    torch.manual_seed(0)
    model = detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=CLASSES)
    from modelship.testing.realistic import make_realistic

    make_realistic(model.backbone, (torch.rand(2, 3, 320, 320) * 2 - 1,))
    return DetectorTensors(model.eval()).eval()


IO = IOSpec.from_dict(
    {
        "inputs": [{"name": "image", "shape": ["batch", 3, "height", "width"], "dtype": "float32"}],
        "outputs": [
            {"name": "boxes", "shape": ["batch", 300, 4], "dtype": "float32"},
            {"name": "scores", "shape": ["batch", 300], "dtype": "float32"},
            {"name": "labels", "shape": ["batch", 300], "dtype": "int64"},
            {"name": "num", "shape": ["batch"], "dtype": "int64"},
        ],
    }
)


def _verdict(reference: DetectorTensors, candidate: torch.nn.Module) -> tuple[bool, str]:
    images = [{"image": np.random.default_rng(seed).random((2, 3, 240, 320), dtype=np.float32)} for seed in (0, 1)]
    kinds = {"boxes": "detections", "scores": "part", "labels": "part", "num": "part"}
    report = compare_runners(
        reference_runner(reference, IO), TorchRunner(candidate, IO, "candidate"), images,
        ToleranceConfig.for_precision("fp32").with_score_edge(0.001), kinds=kinds,
    )  # fmt: skip
    return report.passed, "; ".join(report.failures())


def test_eager_against_itself_passes_and_real_drifts_fail(ssdlite: DetectorTensors) -> None:
    assert _verdict(ssdlite, ssdlite) == (True, "")
    decoding = deepcopy(ssdlite)
    decoding.detector.box_coder.weights = (1.0, 1.0, 1.0, 1.0)  # offsets 5-10 times what eager decodes
    passed, failures = _verdict(ssdlite, decoding)
    assert not passed and "boxes" in failures, failures
    resize = deepcopy(ssdlite)
    resize.detector.transform.fixed_size = (300, 300)  # 320 x 320 in eager
    passed, failures = _verdict(ssdlite, resize)
    assert not passed and "boxes" in failures, failures


@pytest.mark.parametrize("arch", ["fasterrcnn_mobilenet_v3_large_320_fpn"])
def test_localisation_compares_the_same_call_and_not_what_nms_selected(
    arch: str, detector_exports: Callable[[str], tuple[Path, dict]]
) -> None:
    """An FPN's RPN head runs once per level: its scope's last graph tensor is the last level's box offsets, which
    was compared with the first level's logits (cosine 0.07 on a faithful fp32 graph). A faithful graph has no
    divergence, and the modules run on NMS's selection are named as not compared."""
    import json

    folder, _ = detector_exports(arch)  # exported with --arch-kwargs RPN_ALL
    checkpoint = folder.parent.parent / f"{arch}.pt"
    loaded = load_model(LoadOptions(checkpoint, arch=arch, arch_kwargs=json.loads(RPN_ALL)))
    image = np.random.default_rng(0).random((1, 3, 224, 168), dtype=np.float32)
    found = localize_onnx(onnx.load(str(folder / "model.onnx")), loaded.model, Manifest.read(folder).io,
                          {"image": image}, "fp32", "onnx")  # fmt: skip
    assert found.first is None and found.compared > 100, found.lines()
    assert any("detector.roi_heads" in note for note in found.notes), found.notes
