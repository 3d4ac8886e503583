"""A parity verdict: how each output of a candidate differs from its reference, and whether that passes.

Computed by the parity engine (modelship.parity), stored in the manifest for every artifact, printed by the CLI. Plain
data with JSON round-trips (`to_dict` / `from_dict`), so every layer can hold it typed.

Each output's result is of the type its compare function returns (`OutputResult`), tagged with its `kind` in JSON
and rebuilt through `RESULT_TYPES`: a new kind of comparison (masks, boxes, a test's own) registers its result type
with `register_result` and every report, manifest and table carries it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from modelship.contract import box_result, mask_result  # noqa: F401 (their result kinds register: "boxes", "mask")
from modelship.contract.json_object import JsonObject
from modelship.contract.output_result import (
    NON_FINITE,
    PART,
    RESULT_TYPES,
    OutputMetrics,
    OutputResult,
    ResultType,
    register_result,
    result_from_dict,
)
from modelship.contract.tolerance import ToleranceConfig

__all__ = [
    "NON_FINITE",
    "PART",
    "RESULT_TYPES",
    "OutputMetrics",
    "OutputResult",
    "ParityReport",
    "ResultType",
    "SetVerdict",
    "register_result",
    "result_from_dict",
]


@dataclass
class SetVerdict:
    """One input set's own verdict: its label, whether every output passed on it, and each output's result."""

    label: str
    passed: bool
    outputs: list[OutputResult]

    def to_dict(self) -> JsonObject:
        return {"label": self.label, "passed": self.passed, "outputs": [m.to_dict() for m in self.outputs]}

    @classmethod
    def from_dict(cls, data: JsonObject) -> SetVerdict:
        return cls(data["label"], bool(data["passed"]), [result_from_dict(o) for o in data.get("outputs") or []])


@dataclass
class ParityReport:
    """Outputs are aggregated over every input set (worst case); `per_batch` keeps each set's own verdict.
    `error` is set when the candidate could not produce outputs at all (it crashed or raised)."""

    reference: str
    candidate: str
    batch_sizes: list[int]
    outputs: list[OutputResult]
    passed: bool
    seconds: float
    tolerance: ToleranceConfig | None = None  # what it was judged with
    per_batch: list[SetVerdict] | None = None
    error: str | None = None

    def to_dict(self) -> JsonObject:
        return {
            "reference": self.reference,
            "candidate": self.candidate,
            "passed": self.passed,
            "error": self.error,
            "batch_sizes": list(self.batch_sizes),
            "seconds": round(self.seconds, 4),
            "tolerance": self.tolerance.to_dict() if self.tolerance else {},
            "outputs": [m.to_dict() for m in self.outputs],
            "per_batch": None if self.per_batch is None else [v.to_dict() for v in self.per_batch],
        }

    def summary_line(self) -> str:
        """e.g. `onnx_fp16 vs eager: PASS  output max_abs 3.1e-02 cos 0.99991 top1 1.000  (batches 1,8; 0.4 s)`."""
        verdict = "PASS" if self.passed else "FAIL"
        where = f"(batches {','.join(map(str, self.batch_sizes))}; {self.seconds:.1f} s)"
        if self.error:
            return f"{self.candidate} vs {self.reference}: {verdict}  {self.error}  {where}"
        parts = "; ".join(m.summary() for m in self.outputs)
        return f"{self.candidate} vs {self.reference}: {verdict}  {parts}  {where}"

    def first_failed_set(self, usable: Callable[[int], bool] = lambda _index: True) -> int:
        """The index of the first input set (of those `usable`) this candidate failed on; 0 when none is known."""
        rows = self.per_batch or []
        return next((i for i, row in enumerate(rows) if not row.passed and usable(i)), 0)

    def failures(self) -> list[str]:
        """Every reason for failing, prefixed by the output it concerns."""
        reasons = [self.error] if self.error else []
        return reasons + [f"{m.name}: {reason}" for m in self.outputs for reason in m.failures]

    @classmethod
    def from_dict(cls, data: JsonObject) -> ParityReport:
        """A report as `to_dict` wrote it (the manifest's artifacts carry theirs)."""
        return cls(
            reference=data["reference"],
            candidate=data["candidate"],
            batch_sizes=list(data.get("batch_sizes") or []),
            outputs=[result_from_dict(o) for o in data.get("outputs") or []],
            passed=bool(data["passed"]),
            seconds=float(data.get("seconds") or 0.0),
            tolerance=ToleranceConfig.from_dict(data["tolerance"]) if data.get("tolerance") else None,
            per_batch=None if data.get("per_batch") is None else [SetVerdict.from_dict(v) for v in data["per_batch"]],
            error=data.get("error"),
        )
