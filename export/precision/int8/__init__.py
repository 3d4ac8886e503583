"""INT8: the ONNX variant (`onnx_int8`) quantized by ONNX Runtime for the CPU it will be served on, judged on real
inputs held back from calibration, shipped only when accurate and faster than fp32. Registered here with its
options (Int8Options), the check that refuses what it cannot calibrate, and its explanation; the steps are imported
only when an export runs. The decisions are the planner's (planner.py, pure); recipe.py, quantize.py, ranking.py,
speed.py, source.py, smooth.py and per_token.py are the mechanics; strategy.py wires them for one export."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelship.export.precision.int8.options import Int8Options
from modelship.export.precision.registry import Variant, register_variant

if TYPE_CHECKING:
    from modelship.export.build import Build, Finish, Written


def _start(build: Build, written: Written) -> Finish:
    from modelship.export.precision.int8.variant import start_onnx_int8

    return start_onnx_int8(build, written)


def _check(*args: Any) -> None:
    from modelship.export.precision.int8.calibration import check_calibration

    check_calibration(*args)


def _explain(*args: Any) -> Any:
    from modelship.export.precision.int8.explain import explain_onnx_int8

    return explain_onnx_int8(*args)


register_variant(Variant("onnx", "int8", "model.int8.onnx", _start, Int8Options, _check, _explain))
