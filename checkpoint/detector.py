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

import torch
from torch import Tensor, nn

from modelship.contract.box_result import DETECTION_OUTPUTS

__all__ = ["DETECTION_OUTPUTS", "DetectorTensors", "is_detector", "max_detections"]


def is_detector(model: nn.Module) -> bool:
    """A torchvision detector (Faster/Mask/Keypoint R-CNN, RetinaNet, FCOS, SSD, SSDlite)."""
    from torchvision.models.detection.fcos import FCOS
    from torchvision.models.detection.generalized_rcnn import GeneralizedRCNN
    from torchvision.models.detection.retinanet import RetinaNet
    from torchvision.models.detection.ssd import SSD

    return isinstance(model, (GeneralizedRCNN, RetinaNet, FCOS, SSD))


def max_detections(model: nn.Module) -> int:
    """The detector's cap on detections per image (`detections_per_img`)."""
    heads = getattr(model, "roi_heads", None)
    return int(heads.detections_per_img if heads is not None else model.detections_per_img)


class DetectorTensors(nn.Module):
    """A torchvision detector behind fixed-rank tensors (module docstring)."""

    def __init__(self, detector: nn.Module) -> None:
        super().__init__()
        self.detector = detector
        self.max_detections = max_detections(detector)

    def forward(self, image: Tensor) -> dict[str, Tensor]:
        images = [image[i] for i in range(image.shape[0])]
        if torch.jit.is_scripting():  # noqa: SIM108 (TorchScript compiles only this branch of a statement)
            found = self.detector(images)[1]  # scripted detectors answer (losses, detections)
        else:
            found = self.detector(images)
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
