"""`CandidatePool`: every box a detector could have answered, per image: what entered its final NMS, in the input
image's pixels (`modelship.checkpoint.families.torchvision_detector.candidate_pool` records it from eager PyTorch).

It travels with the reference's outputs as reference-only tensors (names starting with REFERENCE_ONLY: never judged
themselves, saved with golden data), so that the `detections` compare function can tell a tie that NMS or a count
cut resolved the other way (the candidate answers a box the reference itself scored the same and dropped) from a
box that really moved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from modelship.contract.tensors import Tensors

REFERENCE_ONLY = "~"  # an output name's prefix: given by the reference for the compare functions, never judged
KEYS = ("~pool_boxes", "~pool_scores", "~pool_labels", "~pool_num", "~pool_iou")


@dataclass
class CandidatePool:
    boxes: list[np.ndarray]  # per image [k, 4] x1, y1, x2, y2 in the input image's pixels
    scores: list[np.ndarray]  # per image [k]
    labels: list[np.ndarray]  # per image [k]
    iou_threshold: float  # the NMS's: two boxes of a label overlapping more than this cannot both be kept

    def to_outputs(self) -> Tensors:
        """The pool as padded reference-only tensors (KEYS) for a batch."""
        rows = max((len(s) for s in self.scores), default=0)

        def padded(parts: list[np.ndarray], dtype: type, tail: tuple[int, ...] = ()) -> np.ndarray:
            out: np.ndarray = np.zeros((len(parts), rows, *tail), dtype)
            for i, part in enumerate(parts):
                out[i, : len(part)] = part
            return out

        return dict(
            zip(
                KEYS,
                (
                    padded(self.boxes, np.float32, (4,)),
                    padded(self.scores, np.float32),
                    padded(self.labels, np.int64),
                    np.array([len(s) for s in self.scores], np.int64),
                    np.full(len(self.scores), self.iou_threshold, np.float32),
                ),
                strict=True,
            )
        )

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, np.ndarray]) -> CandidatePool | None:
        """The pool a reference gave with its outputs; None when it gave none (golden data of older exports, a
        served reference)."""
        if not all(key in outputs for key in KEYS):
            return None
        boxes, scores, labels, num, iou = (np.asarray(outputs[key]) for key in KEYS)
        counts = num.reshape(-1).astype(int)
        return cls(
            [boxes[i, :n].astype(np.float64) for i, n in enumerate(counts)],
            [scores[i, :n].astype(np.float64) for i, n in enumerate(counts)],
            [labels[i, :n] for i, n in enumerate(counts)],
            float(iou.reshape(-1)[0]) if iou.size else 0.0,
        )

    def image(self, index: int) -> CandidatePool:
        """The pool of one image of the batch."""
        return CandidatePool([self.boxes[index]], [self.scores[index]], [self.labels[index]], self.iou_threshold)
