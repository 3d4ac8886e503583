"""One output's result in a parity verdict, typed by its kind: the protocol every result follows, the registry that
reads one back from JSON by its `kind` (`register_result`, `result_from_dict`), and the tensor statistics result
(`OutputMetrics`). Masks and boxes register their own kinds (contract.mask_result, contract.box_result);
contract.parity_report assembles results into a candidate's verdict."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from modelship.contract.json_object import JsonObject
from modelship.contract.registry import Registry

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


class ResultType(Protocol):
    """A result class as `RESULT_TYPES` holds it: its kind, and its `from_dict` classmethod."""

    kind: str

    def from_dict(self, data: JsonObject) -> OutputResult: ...


R = TypeVar("R", bound=ResultType)
PART = "part"  # the compare kind of an output judged within another output's joint verdict (a detector's scores)
RESULT_TYPES: Registry[ResultType] = Registry("result kind")  # kind -> result class (with a `from_dict` classmethod)


def register_result(cls: R) -> R:
    """Class decorator: JSON with `"kind": cls.kind` is read back as `cls` (a kind taken twice is refused)."""
    RESULT_TYPES.add(cls.kind, cls)
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
        # written as text by to_dict
        values: JsonObject = {k: float(v) if v in NON_FINITE else v for k, v in data.items()}
        return cls(**{**values, "shape": tuple(data["shape"])})


def _json_number(value: Any) -> Any:
    """Infinite/NaN floats become strings so the report stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
