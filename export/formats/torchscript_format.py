"""TorchScript (`--torchscript`): the model scripted (or traced with `--trace`), saved and loaded back, and verified
on `build.background` while the other formats export. Its fp16 variant (`start_fp16`, contract.artifacts) is a
half copy of the eager model, scripted the same way (float32 I/O with the casts inside unless `--fp16-io`). fp16
computes in real half precision on the CPU, so its verdict holds as is; when it fails, the modules whose own half
computation diverges are kept in fp32 (export.fp16_strategy) and it is built and verified again."""

from __future__ import annotations

from typing import Any

from modelship.contract.artifact_details import TorchScriptDetails, TorchScriptMethod
from modelship.contract.iospec import IOSpec
from modelship.export.build import Build, BuiltArtifact, Finish, Started, Written, float_io
from modelship.export.formats import FormatExporter, register_format
from modelship.export.precision.fp16.convert import half_module, half_with_float_io
from modelship.export.precision.fp16.onnx_variant import torchscript_keep_modules
from modelship.export.precision.fp16.options import Fp16Options
from modelship.export.torchscript import save_and_reload, script_module, trace_module
from modelship.parity import TorchRunner


def start(build: Build) -> list[Started]:
    """The fp32 module, its verification started on `build.background`."""
    details = _details(build)
    return [
        Started(Written("torchscript", "torchscript", build.io, details), _artifact(build, "torchscript", build.io))
    ]


def start_fp16(build: Build, written: Written) -> Finish:
    """The `torchscript_fp16` variant: a half copy of the eager model, scripted like `written`."""
    half_io = build.spec.options_for(Fp16Options).io
    return _artifact(build, "torchscript_fp16", float_io(written.io, "float16", inputs=half_io, outputs=half_io))


def _details(build: Build) -> TorchScriptDetails:
    return TorchScriptDetails(method=TorchScriptMethod.TRACE if build.spec.trace else TorchScriptMethod.SCRIPT)


def _artifact(build: Build, name: str, io: IOSpec) -> Finish:
    """One TorchScript artifact, written now and verified on `build.background`; returns what waits for it."""
    half = name.endswith("fp16")
    precision = "fp16" if half else "fp32"
    details = _details(build)
    fp16 = build.spec.options_for(Fp16Options)
    if half:
        details.fp16_io, details.fp16_keep = fp16.io, list(fp16.keep)
    runner = TorchRunner(_script(build, name, details, list(fp16.keep)), io, name=name)
    verdict = build.background.submit(build.verify, name, runner, precision)

    def finish() -> BuiltArtifact:
        report = verdict.result()
        if half and not report.passed:
            kept = torchscript_keep_modules(build, name, report)
            if kept:
                details.kept_fp32_modules = kept
                keep = [*fp16.keep, *(k.module for k in kept)]
                report = build.verify(name, TorchRunner(_script(build, name, details, keep), io, name=name), precision)
        return BuiltArtifact(name, "torchscript", precision, io, report, details)

    return finish


def _script(build: Build, name: str, details: TorchScriptDetails, keep: list[str]) -> Any:
    """Script (or trace) the model, or its half copy keeping `keep` in fp32; saved and loaded back."""
    half = name.endswith("fp16")
    half_io = details.fp16_io
    module = build.model
    if half:
        module = (
            half_module(build.model, keep)
            if half_io
            else half_with_float_io(build.model, build.io, build.example, keep)
        )
    with build.steps(f"{details.method} {name}", name):
        if build.spec.trace:
            args = tuple(t.half() if half_io and t.is_floating_point() else t for t in build.example)
            scripted, notes = trace_module(module, args)
            details.tracer_warnings = notes
        else:
            scripted = script_module(module)
        return save_and_reload(scripted, build.path(name))


TORCHSCRIPT = register_format(FormatExporter("torchscript", start, order=0))
