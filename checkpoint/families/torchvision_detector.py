"""One tensor interface for torchvision's detectors, the same in eager PyTorch, TorchScript, ONNX and Triton.

torchvision's detectors take a list of [3, H, W] images and answer a list of dicts of tensors whose length varies
per image (and, scripted, a `(losses, detections)` tuple). `DetectorTensors` wraps one so that it takes a batch
`image [batch, 3, height, width]` (float RGB in [0, 1]; the detector resizes and normalises inside, as in eager)
and answers, per image, `max_detections` rows padded after the valid ones:

    boxes  [batch, max_detections, 4]  float (x1, y1, x2, y2) in the input image's pixels; padding 0
    scores [batch, max_detections]     float, best first; padding 0
    labels [batch, max_detections]     int64 class index; padding -1
    num    [batch]                     int64, how many rows are detections

plus, for the models that have them and padded the same way, Mask R-CNN's `masks [batch, max_detections, 1, H, W]`
(each detection's mask probabilities over the input image) and Keypoint R-CNN's `keypoints [batch, max_detections,
K, 3]` (x, y, visibility) and `keypoints_scores [batch, max_detections, K]`. `max_detections` is the detector's own
`detections_per_img`, so no detection is ever cut.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import torch
from torch import Tensor, nn

from modelship.checkpoint.families.torchvision_keypoints import has_keypoints, recording_keypoint_peaks
from modelship.checkpoint.families.torchvision_recording import patched, recording_scales
from modelship.checkpoint.families.torchvision_resize import use_exact_resize
from modelship.contract.box_result import DETECTION_OUTPUTS
from modelship.contract.candidate_pool import CandidatePool
from modelship.contract.tensors import Tensors

if TYPE_CHECKING:  # torchvision has no type hints: these name what a detector is
    from torchvision.models.detection.fcos import FCOS
    from torchvision.models.detection.generalized_rcnn import GeneralizedRCNN
    from torchvision.models.detection.retinanet import RetinaNet
    from torchvision.models.detection.roi_heads import RoIHeads
    from torchvision.models.detection.ssd import SSD

    Detector: TypeAlias = GeneralizedRCNN | RetinaNet | FCOS | SSD

__all__ = [
    "DETECTION_OUTPUTS",
    "DetectorTensors",
    "box_ops",
    "candidate_pool",
    "is_detector",
    "is_two_stage",
    "max_detections",
    "recording_pool",
    "recording_scales",
]


def is_detector(model: nn.Module) -> bool:
    """A torchvision detector (Faster/Mask/Keypoint R-CNN, RetinaNet, FCOS, SSD, SSDlite)."""
    from torchvision.models.detection.fcos import FCOS
    from torchvision.models.detection.generalized_rcnn import GeneralizedRCNN
    from torchvision.models.detection.retinanet import RetinaNet
    from torchvision.models.detection.ssd import SSD

    return isinstance(model, (GeneralizedRCNN, RetinaNet, FCOS, SSD))


def max_detections(model: nn.Module) -> int:
    """The detector's cap on detections per image (`detections_per_img`)."""
    return int(_postprocessing(model).detections_per_img)


def _postprocessing(detector: nn.Module) -> RoIHeads | Detector:
    """Where a detector's post-processing settings live: an R-CNN's `roi_heads`, else the detector itself."""
    heads = getattr(detector, "roi_heads", None)
    return heads if heads is not None else detector


class DetectorTensors(nn.Module):
    """A torchvision detector behind fixed-rank tensors (module docstring)."""

    def __init__(self, detector: Detector) -> None:
        super().__init__()
        use_exact_resize(detector)
        self.detector = detector
        self.max_detections = max_detections(detector)
        # model hooks (checkpoint.families.model_hooks): the box decoding and NMS stay float32 in an fp16 variant
        self.fp16_parts = ["detector.backbone"]
        self.score_threshold = float(_postprocessing(detector).score_thresh)

    def forward(self, image: Tensor) -> dict[str, Tensor]:
        images = [image[i] for i in range(image.shape[0])]
        if torch.jit.is_scripting():  # noqa: SIM108 (TorchScript compiles only this branch of a statement)
            found = self.detector(images)[1]  # scripted detectors answer (losses, detections)
        else:
            found = self._detect(images)
        rows = self.max_detections
        padded: dict[str, list[Tensor]] = {}
        for detections in found:  # padded by concatenation: an empty answer must export (no slice assignment)
            count = detections["boxes"].shape[0]
            for key, value in detections.items():
                shape = [rows - count] + list(value.shape[1:])  # noqa: RUF005 (TorchScript has no list unpacking)
                padding = torch.full(shape, -1 if key == "labels" else 0, dtype=value.dtype, device=value.device)
                padded.setdefault(key, []).append(torch.cat([value, padding]))
        answer: dict[str, Tensor] = {}
        keys = ["boxes", "scores", "labels"]
        for key in padded:  # then masks, keypoints (TorchScript: no comprehension ifs)
            if key not in keys:
                keys.append(key)
        for key in keys:
            stacked = torch.stack(padded[key])  # reshaped to the row count: the exported graph then declares it
            answer[key] = stacked.reshape([len(found), rows] + list(stacked.shape[2:]))  # noqa: RUF005
        # counted from the answer itself (labels are padded with -1): a count built from Python ints would be
        # recorded as a constant by the ONNX exporter's trace
        answer["num"] = (answer["labels"] >= 0).sum(dim=1)
        return answer

    @torch.jit.unused
    def _detect(self, images: list[Tensor]) -> list[dict[str, Tensor]]:
        """Eager, or traced for ONNX, with torchvision's box operations as in every format (`box_ops`)."""
        with box_ops(tracing=torch.jit.is_tracing()):
            return self.detector(images)

    def scripting_context(self) -> contextlib.AbstractContextManager[None]:
        """Model hook: torchvision's box operations as every format runs them, read by the TorchScript compiler."""
        return box_ops()

    def reference_run(self, run: Callable[[], Tensors], image: Tensor) -> Tensors:
        """Model hook: the eager outputs plus the pool of boxes the detector could have answered
        (`contract.candidate_pool`), with which the `detections` compare function tells ties from moves, and a
        Keypoint R-CNN's heatmap peaks (`contract.keypoint_peaks`). A one-stage detector's pool is recorded during
        the run itself; an R-CNN's takes a run of its own."""
        if is_two_stage(self) and has_keypoints(self):
            with recording_keypoint_peaks(self) as peaks:
                outputs = run()
            rows = outputs["keypoints"].shape[1]
            return outputs | peaks().to_outputs(rows) | candidate_pool(self, image).to_outputs()
        if is_two_stage(self):
            return run() | candidate_pool(self, image).to_outputs()
        with recording_pool(self) as pool:
            outputs = run()
        return outputs | pool(image.shape[0]).to_outputs()


@contextmanager
def box_ops(*, tracing: bool = False) -> Iterator[None]:
    """torchvision's box operations as a DetectorTensors runs them in eager PyTorch, TorchScript (entered while
    scripting: the compiler reads them then) and ONNX (traced):

    - batched NMS always by torchvision's coordinate trick (all classes in one NMS, boxes offset per class), which
      tracing and CUDA use; eager PyTorch on the CPU takes a per-class loop above 1000 boxes instead. The two are
      the same NMS but round differently, and on an R-CNN's thousands of overlapping proposals pairs at the IoU
      threshold flip: a random-weight Faster R-CNN's boxes moved by 20 px between them;
    - while tracing, box clipping without its final reshape (`_clip_boxes`).
    """
    from torchvision.ops import boxes

    saved = boxes.batched_nms, boxes.clip_boxes_to_image
    boxes.batched_nms = boxes._batched_nms_coordinate_trick
    if tracing:
        boxes.clip_boxes_to_image = _clip_boxes
    try:
        yield
    finally:
        boxes.batched_nms, boxes.clip_boxes_to_image = saved


@torch.inference_mode()
def candidate_pool(model: DetectorTensors, image: Tensor) -> CandidatePool:
    """Every box the eager detector could have answered for each image of the batch: what entered its final NMS
    (after its score threshold and its per-class or per-level top-k), in the input image's pixels, with its score
    and label, and the NMS IoU threshold. An R-CNN is run with its RPN keeping every proposal it ranked (no RPN NMS,
    no cut), so that a proposal a tie let through elsewhere is in the pool too. A parity verdict tells a tie
    resolved the other way (a box the reference itself scored the same and dropped) from a box that moved.
    A one-stage detector's pool is what its own run recorded: use `recording_pool` around that run instead."""
    with _every_proposal(model.detector), recording_pool(model) as pool:
        model(image)
    return pool(image.shape[0])


def is_two_stage(model: DetectorTensors) -> bool:
    """An R-CNN: its boxes come from proposals its RPN selected, so its pool needs a run of its own."""
    return getattr(model.detector, "rpn", None) is not None


@contextmanager
def recording_pool(model: DetectorTensors) -> Iterator[Callable[[int], CandidatePool]]:
    """Record what enters the detector's NMS while it runs; yields the function that makes the pool of the last
    run's `count` images (`candidate_pool`)."""
    from torchvision.ops import boxes

    calls: list[tuple[Tensor, Tensor, Tensor, float]] = []
    trick = boxes._batched_nms_coordinate_trick

    def recording_nms(found: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
        calls.append((found, scores, idxs, iou_threshold))
        return trick(found, scores, idxs, iou_threshold)

    with patched(boxes, "_batched_nms_coordinate_trick", recording_nms), recording_scales(model) as scales:

        def pool(count: int) -> CandidatePool:
            final = calls[-count:]  # an R-CNN's RPN runs its NMS first, once per image
            return CandidatePool(
                boxes=[f.float().numpy() * np.tile(s, 2) for (f, *_), s in zip(final, scales(), strict=True)],
                scores=[c[1].float().numpy() for c in final],
                labels=[c[2].numpy() for c in final],
                iou_threshold=float(final[0][3]) if final else 0.0,
            )

        yield pool


@contextmanager
def _every_proposal(detector: nn.Module) -> Iterator[None]:
    """An R-CNN's RPN without its NMS and its post-NMS cut (every top-ranked proposal reaches the box head)."""
    rpn = getattr(detector, "rpn", None)
    if rpn is None:
        yield
        return
    saved = rpn.nms_thresh, rpn._post_nms_top_n
    rpn.nms_thresh, rpn._post_nms_top_n = 1.0, {key: 1 << 30 for key in saved[1]}
    try:
        yield
    finally:
        rpn.nms_thresh, rpn._post_nms_top_n = saved


def _clip_boxes(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    """torchvision's `clip_boxes_to_image` as traced, without its final reshape to the boxes' shape. FCOS and
    RetinaNet clip after keeping the boxes above the score threshold, so an image with nothing in it has none; the
    fp16 ONNX graph then failed on that reshape (ONNX Runtime: "cannot reshape [0, 2, 2] to [0, -1]")."""
    height, width = size
    low = torch.tensor(0, dtype=boxes.dtype, device=boxes.device)
    right, bottom = (torch.tensor(v, dtype=boxes.dtype, device=boxes.device) for v in (width, height))
    x1, y1, x2, y2 = boxes.unbind(-1)
    clipped = [torch.min(torch.max(v, low), high) for v, high in ((x1, right), (y1, bottom), (x2, right), (y2, bottom))]
    return torch.stack(clipped, dim=-1)
