"""fp16: half-precision variants of TorchScript (`torchscript_fp16`, a half copy of the eager model) and ONNX
(`onnx_fp16`, the fp32 graph converted, with what must stay fp32 found by measured ranges and the one
keep-in-higher-precision search). Registered here with their options (Fp16Options) and explanations; the steps are
imported only when an export runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelship.export.precision.fp16.options import Fp16Options
from modelship.export.precision.registry import Variant, register_variant

if TYPE_CHECKING:
    from modelship.export.build import Build, Finish, Written


def _start_torchscript(build: Build, written: Written) -> Finish:
    from modelship.export.precision.fp16.torchscript_variant import start_torchscript_fp16

    return start_torchscript_fp16(build, written)


def _start_onnx(build: Build, written: Written) -> Finish:
    from modelship.export.precision.fp16.onnx_variant import start_onnx_fp16

    return start_onnx_fp16(build, written)


def _explain_torchscript(*args: Any) -> Any:
    from modelship.export.precision.fp16.explain import explain_torchscript_fp16

    return explain_torchscript_fp16(*args)


def _explain_onnx(*args: Any) -> Any:
    from modelship.export.precision.fp16.explain import explain_onnx_fp16

    return explain_onnx_fp16(*args)


register_variant(Variant("torchscript", "fp16", "model.fp16.pt", _start_torchscript, Fp16Options, None,
                         _explain_torchscript))  # fmt: skip
register_variant(Variant("onnx", "fp16", "model.fp16.onnx", _start_onnx, Fp16Options, None, _explain_onnx))
