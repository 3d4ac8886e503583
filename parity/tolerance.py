"""How close is close enough: absolute/relative tolerances plus cosine and top-1 floors, per output.

Defaults come from measurements on this toolchain (docs/parity.md). ONNX Runtime fp32 vs eager PyTorch differs by
3e-6 to 5e-5 on resnet18/50 but 2.7e-4 on resnet101 (logits ~2; operator fusion reorders fp32 sums, and the error
grows with depth), so fp32 allows atol 1e-3: a wrong weight, mean/std or channel order is off by orders more.
fp16 vs fp32 differs by 7e-5 to 4e-2 on logits with cosine >= 0.9995 and top-1 agreement 1.0 on realistic models,
but fp16 resnet50 reaches 0.077 abs and flips one top-1 of 8 on near-tied random inputs: fp16 allows atol 0.1 and
top-1 0.8, and the cosine floor guards the shape of the output.
Detections: a matched box may move 2 px in fp32 and its score 5e-3 (measured: 0.02 px and 1.5e-3, SSDlite with a
random MobileNetV3 backbone, whose float noise grows layer by layer; a wrong resize, mean or box decoding moves
boxes by pixels); fp16 allows 4 px and 0.02.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from modelship.contract.errors import UsageError
from modelship.contract.jsonfile import read_json_object

PRECISIONS = ("fp32", "fp16")


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

    def __post_init__(self) -> None:
        for name in ("atol", "rtol", "box_atol"):
            value = getattr(self, name)
            if value is None and name == "box_atol":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UsageError(f"tolerance {name} must be a number >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        scores = ("score_atol", "score_margin", "score_edge")
        for name in ("min_cosine", "min_top1", "max_mask_disagreement", "min_mask_iou", *scores):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= value <= 1.0:
                raise UsageError(f"tolerance {name} must be a number in [-1, 1] or null, got {value!r}")
            object.__setattr__(self, name, float(value))

    def updated(self, overrides: dict[str, Any]) -> Tolerance:
        """A copy with some fields replaced; unknown keys are a UsageError naming them."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            hint = f"use {', '.join(sorted(known))}"
            raise UsageError(f"unknown tolerance field(s): {', '.join(unknown)}", hint=hint)
        return replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULTS: dict[str, Tolerance] = {
    "fp32": Tolerance(
        atol=1e-3,
        rtol=1e-3,
        min_cosine=0.9999,
        max_mask_disagreement=1e-3,
        min_mask_iou=0.99,
        box_atol=2.0,
        score_atol=5e-3,
        score_margin=0.01,
    ),
    "fp16": Tolerance(
        atol=1e-1,
        rtol=5e-2,
        min_cosine=0.999,
        min_top1=0.8,
        max_mask_disagreement=1e-2,
        min_mask_iou=0.95,
        box_atol=4.0,
        score_atol=2e-2,
        score_margin=0.05,
    ),
}


@dataclass(frozen=True)
class ToleranceConfig:
    """A default tolerance and per-output exceptions (keyed by output name)."""

    default: Tolerance
    per_output: dict[str, Tolerance] = field(default_factory=dict)

    def for_output(self, name: str) -> Tolerance:
        return self.per_output.get(name, self.default)

    @classmethod
    def for_precision(cls, precision: str, overrides: dict[str, Any] | None = None) -> ToleranceConfig:
        """The defaults for "fp32" or "fp16", with `overrides` applied.

        `overrides` holds Tolerance fields (`{"atol": 1e-3}`) and/or `"per_output": {name: {fields}}`; per-output
        entries start from the (overridden) default. It may also be keyed by precision
        (`{"fp16": {...}, "fp32": {...}}`), as in a `--tolerances` file; only the matching key applies.
        """
        if precision not in PRECISIONS:
            raise UsageError(f"unknown precision {precision!r}", hint=f"use one of {PRECISIONS}")
        overrides = dict(overrides or {})
        if set(overrides) & set(PRECISIONS):
            stray = sorted(set(overrides) - set(PRECISIONS))
            if stray:
                raise UsageError(f"tolerances keyed by precision cannot also hold {', '.join(stray)}")
            overrides = dict(overrides.get(precision) or {})
        per_output = overrides.pop("per_output", None) or {}
        if not isinstance(per_output, dict):
            raise UsageError("tolerance 'per_output' must map output names to tolerance fields")
        default = DEFAULTS[precision].updated(overrides)
        return cls(default, {name: default.updated(dict(values)) for name, values in per_output.items()})

    def with_score_edge(self, edge: float | None) -> ToleranceConfig:
        """Detections: `edge` (the model's score threshold) as the score edge wherever none was asked for."""
        if edge is None:
            return self

        def edged(tolerance: Tolerance) -> Tolerance:
            return tolerance if tolerance.score_edge is not None else replace(tolerance, score_edge=edge)

        return ToleranceConfig(edged(self.default), {name: edged(t) for name, t in self.per_output.items()})

    def to_dict(self) -> dict[str, Any]:
        return {"default": self.default.to_dict(), "per_output": {k: v.to_dict() for k, v in self.per_output.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToleranceConfig:
        return cls(
            Tolerance(**data["default"]),
            {name: Tolerance(**values) for name, values in (data.get("per_output") or {}).items()},
        )


def read_overrides(path: Path) -> dict[str, Any]:
    """A `--tolerances` JSON file: Tolerance fields and `per_output`, optionally keyed by precision."""
    return read_json_object(path, "tolerance file", hint='e.g. {"fp16": {"atol": 0.1}}')


@dataclass(frozen=True)
class ToleranceOverrides:
    """Tolerances asked for on the command line, merged in one place for every command: a `--tolerances` file
    (flat, or keyed by precision) first, then `every` (flags for all precisions), then `by_precision` (flags for
    one precision). `flags` names the flag of each value, so a negative one is refused by its name."""

    file: Path | None = None
    every: dict[str, float] = field(default_factory=dict)
    by_precision: dict[str, dict[str, float]] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)  # "fp16.atol" / "atol" -> "--fp16-atol"

    def __post_init__(self) -> None:
        values = {**self.every, **{f"{p}.{k}": v for p, d in self.by_precision.items() for k, v in d.items()}}
        for key, value in values.items():
            if value < 0:
                raise UsageError(f"{self.flags.get(key, key)} must be >= 0, got {value}")

    def resolved(self) -> dict[str, dict[str, Any]]:
        """The overrides keyed by precision, as `ToleranceConfig.for_precision` and ExportSpec take them."""
        loaded = read_overrides(self.file) if self.file else {}
        keyed = set(loaded) & set(PRECISIONS)
        if keyed and set(loaded) - set(PRECISIONS):
            stray = ", ".join(sorted(set(loaded) - set(PRECISIONS)))
            raise UsageError(f"{self.file}: tolerances keyed by precision cannot also hold {stray}")
        base = {p: dict(loaded.get(p) or {}) if keyed else dict(loaded) for p in PRECISIONS}
        return {p: {**base[p], **self.every, **self.by_precision.get(p, {})} for p in PRECISIONS}

    def config(self, precision: str) -> ToleranceConfig:
        return ToleranceConfig.for_precision(precision, self.resolved())
