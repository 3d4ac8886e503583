"""`Tolerance`: how close is close enough for one output. Each precision's default bars are built from it
(contract.precisions); contract.tolerance merges them with a user's overrides (`ToleranceConfig`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject


@dataclass(frozen=True)
class Tolerance:
    """Element-wise `|candidate - reference| <= atol + rtol * |reference|` (numpy.allclose), plus optional floors on
    the minimum per-sample cosine similarity and on top-1 agreement (classifier-shaped outputs only)."""

    atol: float
    rtol: float
    min_cosine: float | None = None
    min_top1: float | None = None
    max_mask_disagreement: float | None = None  # masks: the share of pixels whose class may differ
    min_mask_iou: float | None = None  # masks: the mean per-class IoU floor
    box_atol: float | None = None  # detections: how far (pixels) a matched box's coordinates may move
    score_atol: float | None = None  # detections: how far a matched box's score may move
    score_margin: float | None = None  # detections: unmatched boxes scoring within this of the edge are tolerated
    score_edge: float | None = None  # detections: the model's score threshold (0 when not given)
    min_top5: float | None = None  # classifiers: share of samples whose reference class is in the candidate's top 5
    elementwise: bool = True  # False: atol/rtol are figures for the record, not a bar (INT8: the task's answer is)

    def __post_init__(self) -> None:
        for name in ("atol", "rtol", "box_atol"):
            value = getattr(self, name)
            if value is None and name == "box_atol":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise UsageError(f"tolerance {name} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        scores = ("score_atol", "score_margin", "score_edge")
        for name in ("min_cosine", "min_top1", "min_top5", "max_mask_disagreement", "min_mask_iou", *scores):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= value <= 1.0:
                raise UsageError(f"tolerance {name} must be a number in [-1, 1] or null, got {value!r}")
            object.__setattr__(self, name, float(value))

    def updated(self, overrides: JsonObject) -> Tolerance:
        """A copy with some fields replaced; unknown keys are a UsageError naming them."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            hint = f"use {', '.join(sorted(known))}"
            raise UsageError(f"unknown tolerance field(s): {', '.join(unknown)}", hint=hint)
        return replace(self, **overrides)

    def to_dict(self) -> JsonObject:
        return asdict(self)
