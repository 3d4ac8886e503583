"""`Tolerance`: how close is close enough for one output (parity.tolerance holds the measured defaults' story and
the overrides; contract.precisions, each precision's default bars)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace

from modelship.contract.errors import UsageError
from modelship.contract.jsonfile import JsonObject


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
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UsageError(f"tolerance {name} must be a number >= 0, got {value!r}")
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


def keyed_by_precision(overrides: JsonObject, precisions: Sequence[str], where: str = "tolerances") -> bool:
    """Whether `overrides` is keyed by precision (`{"fp16": {...}}`); a UsageError when it mixes precision keys with
    fields (`where` names the source)."""
    keyed = set(overrides) & set(precisions)
    stray = sorted(set(overrides) - set(precisions))
    if keyed and stray:
        raise UsageError(f"{where} keyed by precision cannot also hold {', '.join(stray)}")
    return bool(keyed)


@dataclass(frozen=True)
class ToleranceConfig:
    """A default tolerance and per-output exceptions (keyed by output name)."""

    default: Tolerance
    per_output: dict[str, Tolerance] = field(default_factory=dict)

    def for_output(self, name: str) -> Tolerance:
        return self.per_output.get(name, self.default)

    @classmethod
    def for_precision(
        cls, precision: str, overrides: JsonObject | None = None, task: str | None = None
    ) -> ToleranceConfig:
        """The defaults of `precision` for `task` (contract.precisions), with `overrides` applied.

        `overrides` holds Tolerance fields (`{"atol": 1e-3}`) and/or `"per_output": {name: {fields}}`; per-output
        entries start from the (overridden) default. It may also be keyed by precision
        (`{"fp16": {...}, "fp32": {...}}`), as in a `--tolerances` file; only the matching key applies.
        """
        from modelship.contract.precisions import get_precision, precision_names  # precisions import Tolerance

        defaults = get_precision(precision).default_tolerance(task)
        overrides = dict(overrides or {})
        if keyed_by_precision(overrides, precision_names()):
            overrides = dict(overrides.get(precision) or {})
        per_output = overrides.pop("per_output", None) or {}
        if not isinstance(per_output, dict):
            raise UsageError("tolerance 'per_output' must map output names to tolerance fields")
        default = defaults.updated(overrides)
        return cls(default, {name: default.updated(dict(values)) for name, values in per_output.items()})

    def with_score_edge(self, edge: float | None) -> ToleranceConfig:
        """Detections: `edge` (the model's score threshold) as the score edge wherever none was asked for."""
        if edge is None:
            return self

        def edged(tolerance: Tolerance) -> Tolerance:
            return tolerance if tolerance.score_edge is not None else replace(tolerance, score_edge=edge)

        return ToleranceConfig(edged(self.default), {name: edged(t) for name, t in self.per_output.items()})

    def to_dict(self) -> JsonObject:
        return {"default": self.default.to_dict(), "per_output": {k: v.to_dict() for k, v in self.per_output.items()}}

    @classmethod
    def from_dict(cls, data: JsonObject) -> ToleranceConfig:
        return cls(
            Tolerance(**data["default"]),
            {name: Tolerance(**values) for name, values in (data.get("per_output") or {}).items()},
        )
