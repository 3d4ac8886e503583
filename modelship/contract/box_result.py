"""`BoxMetrics`: how a detector's answers from a candidate differ from the reference's, box by box.

Per image, the valid boxes (the first `num` rows) of the reference and the candidate are matched one to one: same
label, IoU at least MATCH_IOU, the best-overlapping pairs first. Matched boxes are compared on their coordinates
(pixels) and scores; an unmatched box is `tolerated` when its score is within the score margin of the threshold edge
(the model's score threshold, or the lowest score kept when the image's list is full), where NMS ties and the
threshold legitimately flip boxes, and counted against the verdict otherwise. A box that differs only because a tie
was resolved the other way (`parity.box_compare.Ties`) is a tie flip: counted and shown, not a failure. Matched boxes'
masks (Mask R-CNN) are compared by IoU, their keypoints (Keypoint R-CNN) in pixels, a keypoint moved by a heatmap
tie counted apart (`keypoint_ties`). Padded rows are never compared.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import ClassVar

from modelship.contract.json_object import JsonObject
from modelship.contract.output_result import register_result

DETECTION_OUTPUTS = ("boxes", "scores", "labels", "num")  # a detector's tensors (families.torchvision_detector)


@register_result
@dataclass
class BoxMetrics:
    name: str
    images: int
    reference_boxes: int
    candidate_boxes: int
    matched: int
    max_box_diff: float  # pixels, over matched boxes' coordinates
    max_score_diff: float
    tolerated: int  # unmatched boxes near the threshold edge
    tie_flips: int = 0  # boxes in one answer and not the other only because a tie was resolved the other way
    unmatched_scores: list[float] = field(default_factory=list)  # the others' scores, highest first
    mask_iou: float | None = None  # Mask R-CNN: the lowest IoU of matched boxes' masks (binarised at 0.5)
    keypoint_diff: float | None = None  # Keypoint R-CNN: how far (pixels) a matched box's keypoint moves at most
    keypoint_ties: int = 0  # keypoints that moved only because a heatmap tie was resolved the other way
    passed: bool = True
    failures: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "boxes"

    @property
    def unmatched(self) -> int:
        return len(self.unmatched_scores)

    def figures(self) -> dict[str, str]:
        return {
            "boxes": f"{self.matched}/{self.reference_boxes} matched",
            "max box diff": f"{self.max_box_diff:.2g} px",
            "max score diff": f"{self.max_score_diff:.1e}",
            "unmatched": f"{self.unmatched} (+{self.tolerated} at the edge, +{self.tie_flips} tie flips)",
            **({"mask IoU": f"{self.mask_iou:.4f}"} if self.mask_iou is not None else {}),
            **({"keypoints": self._keypoints()} if self.keypoint_diff is not None else {}),
        }

    def _keypoints(self) -> str:
        return f"{self.keypoint_diff:.2g} px" + (f" (+{self.keypoint_ties} ties)" if self.keypoint_ties else "")

    def summary(self) -> str:
        return (
            f"{self.name} {self.matched}/{self.reference_boxes} matched, max diff {self.max_box_diff:.2g} px, "
            f"{self.unmatched} unmatched" + (f", {self.tie_flips} tie flips" if self.tie_flips else "")
        )

    def to_dict(self) -> JsonObject:
        return {"kind": self.kind, **asdict(self)}

    @classmethod
    def from_dict(cls, data: JsonObject) -> BoxMetrics:
        return cls(**{k: v for k, v in data.items() if k != "kind"})
