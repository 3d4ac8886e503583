"""`MaskMetrics`: how a segmentation output of a candidate differs from the reference, as masks and as logits.

The mask is the argmax over the class axis (axis 1 of [batch, classes, height, width]). `disagreement` is the
share of pixels whose class differs; per class, the IoU between the reference's and the candidate's pixels of that
class. `class_counts` keeps, per class, (intersection, union, reference pixels) so results pool over input sets
exactly. The logits are judged element-wise too (`tensor`, as for any tensor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from modelship.contract.json_object import JsonObject
from modelship.contract.output_result import OutputMetrics, register_result


@register_result
@dataclass
class MaskMetrics:
    name: str
    tensor: OutputMetrics
    pixels: int
    disagreement: float  # share of pixels whose class differs
    mean_iou: float  # over the classes that cover at least IOU_MIN_SHARE of the reference's pixels
    worst_iou: float
    worst_class: int | None
    class_counts: dict[int, tuple[int, int, int]] = field(default_factory=dict, repr=False)
    passed: bool = True
    failures: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "mask"

    def figures(self) -> dict[str, str]:
        return {
            "max abs": f"{self.tensor.max_abs:.1e}",
            "cosine": f"{self.tensor.cosine:.6f}",
            "pixels off": f"{self.disagreement:.3%}",
            "mean IoU": f"{self.mean_iou:.4f}",
            "worst IoU": f"{self.worst_iou:.4f}" + ("" if self.worst_class is None else f" (class {self.worst_class})"),
        }

    def summary(self) -> str:
        return (
            f"{self.name} pixels off {self.disagreement:.3%} mean IoU {self.mean_iou:.4f} "
            f"max_abs {self.tensor.max_abs:.2g}"
        )

    def to_dict(self) -> JsonObject:
        return {
            "kind": self.kind,
            "name": self.name,
            "tensor": self.tensor.to_dict(),
            "pixels": self.pixels,
            "disagreement": self.disagreement,
            "mean_iou": self.mean_iou,
            "worst_iou": self.worst_iou,
            "worst_class": self.worst_class,
            "class_counts": {str(k): list(v) for k, v in self.class_counts.items()},
            "passed": self.passed,
            "failures": list(self.failures),
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> MaskMetrics:
        tensor = {k: v for k, v in data["tensor"].items() if k != "kind"}
        return cls(
            name=data["name"],
            tensor=OutputMetrics.from_dict(tensor),
            pixels=int(data["pixels"]),
            disagreement=float(data["disagreement"]),
            mean_iou=float(data["mean_iou"]),
            worst_iou=float(data["worst_iou"]),
            worst_class=data.get("worst_class"),
            class_counts={int(k): tuple(v) for k, v in (data.get("class_counts") or {}).items()},
            passed=bool(data["passed"]),
            failures=list(data.get("failures") or []),
        )
