"""An INT8 recipe: what is quantized and how, every mode an enum. ONNX Runtime's quantizer applies it
(export.precision.int8.quantize); the planner decides which recipes are tried (planner)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

WEIGHT_OPS = ("Conv", "MatMul", "Gemm")  # what carries the time, and what INT8 kernels speed up
SATURATION = (
    "an x86 CPU without VNNI (AVX2) sums pairs of uint8 x int8 products in 16 bits and saturates on full-range "
    "weights (ONNX Runtime's documented caveat); 7-bit weights never do"
)


class Mode(StrEnum):
    """Static: activations quantized with ranges calibrated ahead (QDQ). Dynamic: weights quantized ahead,
    activations as the model runs (no calibration data)."""

    STATIC = "static"
    DYNAMIC = "dynamic"


class Activations(StrEnum):
    """A static recipe's activation type: U8S8 (uint8 activations, int8 weights: x86 VNNI's fast path) or S8S8
    (ONNX Runtime's documented default)."""

    UINT8 = "uint8"
    INT8 = "int8"

    @property
    def pair(self) -> str:
        return "U8S8" if self is Activations.UINT8 else "S8S8"


class Calibration(StrEnum):
    """How a static recipe's activation ranges are read off the calibration inputs."""

    MINMAX = "minmax"
    ENTROPY = "entropy"
    PERCENTILE = "percentile"


class ActivationScale(StrEnum):
    """How dynamic INT8 scales an activation: one scale for the whole batch (ONNX Runtime's DynamicQuantizeLinear: a
    row's answer moves with its batchmates) or one per row (export.precision.int8.per_token: it never does)."""

    TENSOR = "per-tensor"
    TOKEN = "per-token"


@dataclass(frozen=True)
class Int8Recipe:
    """How to quantize: `mode`; a static recipe's `activations` and `method` (Calibration); `per_channel` weight
    scales; `ops` the op types quantized; `excluded` nodes kept float; `reduce_range` weights in 7 bits (see
    SATURATION); `scale` a dynamic recipe's activation scales."""

    mode: Mode = Mode.STATIC
    activations: Activations = Activations.UINT8
    per_channel: bool = True
    method: Calibration = Calibration.MINMAX
    ops: tuple[str, ...] = WEIGHT_OPS
    excluded: tuple[str, ...] = ()
    reduce_range: bool = True
    scale: ActivationScale = ActivationScale.TOKEN

    def __post_init__(self) -> None:  # the modes' names are accepted too ("dynamic", "percentile")
        object.__setattr__(self, "mode", Mode(self.mode))
        object.__setattr__(self, "activations", Activations(self.activations))
        object.__setattr__(self, "method", Calibration(self.method))
        object.__setattr__(self, "scale", ActivationScale(self.scale))

    def describe(self) -> str:
        weights = "per-channel" if self.per_channel else "per-tensor"
        if self.mode is Mode.DYNAMIC:
            text = f"dynamic, {self.scale.value} uint8 activations, {weights} int8 weights"
        else:
            text = f"static QDQ {self.activations.pair}, {weights}, {self.method.value}"
        text += f", {'7-bit weights, ' if self.reduce_range else ''}{'/'.join(self.ops)}"
        count = len(self.excluded)
        return text + (f", {count} node{'s' if count > 1 else ''} float" if count else "")

    def excluding(self, nodes: Sequence[str]) -> Int8Recipe:
        return replace(self, excluded=tuple(dict.fromkeys((*self.excluded, *nodes))))
