"""A parity verdict: how each output of a candidate differs from its reference, and whether that passes.

Computed by the parity engine (export.parity), stored in the manifest for every artifact, printed by the CLI. Plain
data with JSON round-trips (`to_dict` / `from_dict`), so every layer can hold it typed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

NON_FINITE = ("inf", "-inf", "nan")


@dataclass
class OutputMetrics:
    """How one output of a candidate differs from the reference.

    `cosine` is the minimum per-sample cosine similarity (per item along axis 0; the whole tensor when 0-/1-D).
    `top1_agreement`/`topk_agreement` (mean overlap of the top-k sets) exist only for classifier-shaped outputs:
    2-D float tensors with at least two classes. `required_atol` is the smallest atol that would have passed at the
    configured rtol, `required_rtol` the smallest rtol that would have passed at the configured atol.
    """

    name: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    mean_abs: float
    median_abs: float
    p99_abs: float
    cosine: float
    top1_agreement: float | None
    topk_agreement: float | None
    nan_count: int
    inf_count: int
    reference_nan_count: int
    reference_inf_count: int
    required_atol: float
    required_rtol: float
    samples: int
    passed: bool = True
    failures: list[str] = field(default_factory=list)
    structural_failures: list[str] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["shape"] = list(self.shape)
        del out["structural_failures"]
        return {k: _json_number(v) for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutputMetrics:
        values = {k: float(v) if v in NON_FINITE else v for k, v in data.items()}  # written as text by to_dict
        return cls(**{**values, "shape": tuple(data["shape"])})


@dataclass
class ParityReport:
    """Outputs are aggregated over every input set (worst case); `per_batch` keeps each set's own figures.
    `error` is set when the candidate could not produce outputs at all (it crashed or raised)."""

    reference: str
    candidate: str
    batch_sizes: list[int]
    outputs: list[OutputMetrics]
    passed: bool
    seconds: float
    tolerance: dict[str, Any] = field(default_factory=dict)
    per_batch: list[dict[str, Any]] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "candidate": self.candidate,
            "passed": self.passed,
            "error": self.error,
            "batch_sizes": list(self.batch_sizes),
            "seconds": round(self.seconds, 4),
            "tolerance": self.tolerance,
            "outputs": [m.to_dict() for m in self.outputs],
            "per_batch": self.per_batch,
        }

    def summary_line(self) -> str:
        """e.g. `onnx_fp16 vs eager: PASS  output max_abs 3.1e-02 cos 0.99991 top1 1.000  (batches 1,8; 0.4 s)`."""
        verdict = "PASS" if self.passed else "FAIL"
        where = f"(batches {','.join(map(str, self.batch_sizes))}; {self.seconds:.1f} s)"
        if self.error:
            return f"{self.candidate} vs {self.reference}: {verdict}  {self.error}  {where}"
        parts = []
        for m in self.outputs:
            text = f"{m.name} max_abs {m.max_abs:.2g} cos {m.cosine:.5f}"
            if m.top1_agreement is not None:
                text += f" top1 {m.top1_agreement:.3f}"
            parts.append(text)
        return f"{self.candidate} vs {self.reference}: {verdict}  {'; '.join(parts)}  {where}"

    def first_failed_set(self, usable: Callable[[int], bool] = lambda _index: True) -> int:
        """The index of the first input set (of those `usable`) this candidate failed on; 0 when none is known."""
        rows = self.per_batch or []
        return next((i for i, row in enumerate(rows) if not row["passed"] and usable(i)), 0)

    def failures(self) -> list[str]:
        """Every reason for failing, prefixed by the output it concerns."""
        reasons = [self.error] if self.error else []
        return reasons + [f"{m.name}: {reason}" for m in self.outputs for reason in m.failures]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParityReport:
        """A report as `to_dict` wrote it (the manifest's artifacts carry theirs)."""
        return cls(
            reference=data["reference"],
            candidate=data["candidate"],
            batch_sizes=list(data.get("batch_sizes") or []),
            outputs=[OutputMetrics.from_dict(o) for o in data.get("outputs") or []],
            passed=bool(data["passed"]),
            seconds=float(data.get("seconds") or 0.0),
            tolerance=dict(data.get("tolerance") or {}),
            per_batch=data.get("per_batch"),
            error=data.get("error"),
        )


def _json_number(value: Any) -> Any:
    """Infinite/NaN floats become strings so the report stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
