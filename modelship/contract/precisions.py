"""The precisions an artifact can have, registered by name: what each is called on the command line, the bars its
artifacts are judged by (per task, where a task's answer is judged differently), and how far a module's output may
drift before localisation calls it the first divergence.

Every precision but fp32 is a variant asked for by its flag (`--fp16`, `--int8`); export.precision.registry says
which formats have which. The flags, the choices of `modelship parity --precision` and the tolerance files' keys are all
read from here, so a precision registered later (a test's) reaches every command.

Defaults are measured (docs/parity.md): ONNX Runtime fp32 vs eager PyTorch differs by 3e-6 to 2.7e-4 on ResNets
(operator fusion reorders fp32 sums), so fp32 allows atol 1e-3, far below what a wrong weight, mean/std or channel
order does; fp16 differs by 7e-5 to 4e-2 on logits with cosine >= 0.9995, but resnet50 reaches 0.077 and flips one
top-1 of 8 on near-tied random inputs, so fp16 allows atol 0.1 and top-1 0.8 with the cosine floor guarding the
output's shape. Boxes move 0.02 px in fp32 (bar 2) and a wrong resize moves them by pixels; fp16 allows 4 px. INT8
changes every logit by design, so it is judged by the task's answer on real held-back inputs
(export.precision.int8): the class, the mask, the boxes, the embedding's direction, with the element-wise figures
kept for the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from modelship.contract.bars import Tolerance
from modelship.contract.registry import Registry

FP32 = "fp32"


@dataclass(frozen=True)
class Precision:
    """`name`: the manifest's and the tolerance files' key; `flag`: the export-model flag that asks for its variants
    (None: always written); `help`: that flag's help; `tolerance`: its default bars, `by_task`: fields replaced for
    one task; `localise_limit`: max |a - b| / max |a| for a module's output to count as unchanged."""

    name: str
    flag: str | None
    help: str
    tolerance: Tolerance
    by_task: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    localise_limit: float = 1e-3
    serves_first: bool = False

    def default_tolerance(self, task: str | None = None) -> Tolerance:
        """The bars for an artifact of this precision exported for `task` (None: the precision's own)."""
        changes = self.by_task.get(task or "", {})
        return replace(self.tolerance, **changes) if changes else self.tolerance

    @property
    def tolerance_flag(self) -> str:
        """The prefix of its tolerance flags: --atol for fp32, --fp16-atol for fp16."""
        return "--" if self.name == FP32 else f"--{self.name}-"


PRECISIONS: Registry[Precision] = Registry("precision")


def register_precision(precision: Precision, *, replace: bool = False) -> Precision:
    return PRECISIONS.add(precision.name, precision, replace=replace)


def precision_names() -> tuple[str, ...]:
    """Every precision, fp32 first, in the order registered."""
    return tuple(PRECISIONS)


def variant_precisions() -> tuple[Precision, ...]:
    """The precisions asked for by a flag (every one but fp32)."""
    return tuple(p for p in PRECISIONS.values() if p.flag is not None)


def get_precision(name: str) -> Precision:
    """The precision called `name`; a UsageError naming the known ones."""
    return PRECISIONS.find(name)


register_precision(
    Precision(
        FP32,
        None,
        "Every export writes fp32 artifacts.",
        Tolerance(
            atol=1e-3,
            rtol=1e-3,
            min_cosine=0.9999,
            max_mask_disagreement=1e-3,
            min_mask_iou=0.99,
            box_atol=2.0,
            score_atol=5e-3,
            score_margin=0.01,
        ),
    )
)
register_precision(
    Precision(
        "fp16",
        "--fp16",
        "Also write an fp16 variant of each format that has one (model.fp16.pt, model.fp16.onnx).",
        Tolerance(
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
        localise_limit=5e-2,
    )
)
register_precision(
    Precision(
        "int8",
        "--int8",
        "Also write an INT8 ONNX variant (model.int8.onnx), quantized for the CPU it will be served on and judged on "
        "real inputs held back from --calibrate; it is written only when accurate and measured faster than fp32 "
        "(else declined in one line: see --keep-slower, --require-variants).",
        Tolerance(atol=1e-1, rtol=1e-1, elementwise=False, box_atol=8.0, score_atol=5e-2, score_margin=0.1),
        by_task=MappingProxyType(
            {
                "classification": {"min_top1": 0.9, "min_top5": 0.98},
                "text-classification": {"min_top1": 0.9, "min_top5": 0.98},
                "token-classification": {"min_top1": 0.9},
                "segmentation": {"max_mask_disagreement": 5e-2, "min_mask_iou": 0.85},
                "sentence-embedding": {"min_cosine": 0.99},
            }
        ),
        localise_limit=2e-1,
        serves_first=True,
    )
)
