"""A parity verdict: how each output of a candidate differs from its reference, and whether that passes.

Computed by the parity engine (modelship.parity), stored in the manifest for every artifact, printed by the CLI. Plain
data with JSON round-trips (`to_dict` / `from_dict`), so every layer can hold it typed.

Each output's result is of the type its compare function returns (`OutputResult`), tagged with its `kind` in JSON
and rebuilt through `RESULT_TYPES`: a new kind of comparison (masks, boxes, a test's own) registers its result type
with `register_result` and every report, manifest and table carries it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from modelship.contract.jsonfile import JsonObject
from modelship.contract.registry import Registry
from modelship.contract.tolerance import ToleranceConfig

NON_FINITE = ("inf", "-inf", "nan")


class OutputResult(Protocol):
    """What a compare function says of one output: its verdict, the reasons, and the figures a reviewer reads."""

    kind: ClassVar[str]
    name: str
    passed: bool
    failures: list[str]

    def figures(self) -> dict[str, str]:
        """Table cells by column name (e.g. {"max abs": "3.1e-02"}); columns a result lacks show "-"."""
        ...

    def summary(self) -> str:
        """One line for `summary_line`, e.g. `logits max_abs 0.031 cos 0.99991 top1 1.000`."""
        ...

    def to_dict(self) -> JsonObject: ...


R = TypeVar("R")
PART = "part"  # the compare kind of an output judged within another output's joint verdict (a detector's scores)
RESULT_TYPES: Registry[type] = Registry("result kind")  # kind -> result class (with a `from_dict` classmethod)


def register_result(cls: type[R]) -> type[R]:
    """Class decorator: JSON with `"kind": cls.kind` is read back as `cls`."""
    RESULT_TYPES.add(cls.kind, cls)  # type: ignore[attr-defined]
    return cls


def result_from_dict(data: JsonObject) -> OutputResult:
    """A result as its `to_dict` wrote it; results written before kinds existed are tensor statistics."""
    kind = data.get("kind", OutputMetrics.kind)
    if kind not in RESULT_TYPES:
        raise ValueError(f"unknown output result kind {kind!r} (known: {', '.join(sorted(RESULT_TYPES))})")
    return RESULT_TYPES[kind].from_dict({k: v for k, v in data.items() if k != "kind"})


@register_result
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
    top5_containment: float | None = None  # the share of samples whose reference class is in the candidate's top 5
    kind: ClassVar[str] = "tensor"

    def figures(self) -> dict[str, str]:
        top1 = "-" if self.top1_agreement is None else f"{self.top1_agreement:.3f}"
        return {
            "max abs": f"{self.max_abs:.1e}",
            "p99 abs": f"{self.p99_abs:.1e}",
            "cosine": f"{self.cosine:.6f}",
            "top-1": top1,
            "req. atol": f"{self.required_atol:.1e}",
        }

    def summary(self) -> str:
        text = f"{self.name} max_abs {self.max_abs:.2g} cos {self.cosine:.5f}"
        if self.top1_agreement is not None:
            text += f" top1 {self.top1_agreement:.3f}"
        return text

    def to_dict(self) -> JsonObject:
        out = asdict(self)
        out["shape"] = list(self.shape)
        del out["structural_failures"]
        return {"kind": self.kind, **{k: _json_number(v) for k, v in out.items()}}

    @classmethod
    def from_dict(cls, data: JsonObject) -> OutputMetrics:
        values = {k: float(v) if v in NON_FINITE else v for k, v in data.items()}  # written as text by to_dict
        return cls(**{**values, "shape": tuple(data["shape"])})


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


def _json_number(value: Any) -> Any:
    """Infinite/NaN floats become strings so the report stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


from modelship.contract import box_result, mask_result  # noqa: E402,F401 (register the "boxes" and "mask" result kinds)
