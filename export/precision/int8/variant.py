"""The `onnx_int8` variant (export.precision.registry): the fp32 graph quantized by export.precision.int8.strategy,
written as model.int8.onnx beside golden.int8.npz (the held-back inputs it was judged on and eager's outputs for
them, so `modelship parity --against golden` re-checks it without the checkpoint), or declined in one line, with
what its search recorded, when no try was accurate enough or it measured slower than fp32."""

from __future__ import annotations

from modelship.contract.manifest import Declined
from modelship.export.build import Build, BuiltArtifact, Finish, Written
from modelship.export.precision.int8.strategy import build_int8
from modelship.parity import save_golden

NAME = "onnx_int8"
GOLDEN = "golden.int8.npz"


def start_onnx_int8(build: Build, written: Written) -> Finish:
    """Quantize, judge and time now; the Finish gives the artifact, or its Declined."""
    path = build.path(NAME)
    result = build_int8(build, build.path(written.name), written.io, path)
    if result.declined is not None:
        path.unlink(missing_ok=True)
        declined = Declined(NAME, result.declined, result.details)
        return lambda: declined
    save_golden(build.file(GOLDEN), result.verification.inputs, result.verification.outputs)
    result.details.golden = GOLDEN
    built = BuiltArtifact(
        NAME, "onnx", "int8", written.io, result.report, result.details, files=(GOLDEN,), judged=result.verification
    )
    return lambda: built
