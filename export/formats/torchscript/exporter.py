"""TorchScript's exporter (`--torchscript`): the model scripted (or traced with `--trace`, jit.py), saved and
loaded back, and verified on `build.background` while the other formats export. Its fp16 variant
(export.precision.fp16.torchscript_variant) scripts a half copy of the model the same way (`script`)."""

from __future__ import annotations

from typing import Any

from torch import nn

from modelship.contract.artifact_details import TorchScriptDetails, TorchScriptMethod
from modelship.contract.precisions import FP32
from modelship.export.build import Build, BuiltArtifact, Started, Written
from modelship.export.formats.registry import FormatExporter, register_format
from modelship.export.formats.torchscript import FORMAT
from modelship.export.formats.torchscript.jit import save_and_reload, script_module, trace_module
from modelship.parity import TorchRunner


def start(build: Build) -> list[Started]:
    """The fp32 module, its verification started on `build.background`."""
    details = script_details(build)
    runner = TorchRunner(script(build, FORMAT, build.model, details), build.io, name=FORMAT)
    verdict = build.background.submit(build.verify, FORMAT, runner, FP32)

    def finish() -> BuiltArtifact:
        return BuiltArtifact(FORMAT, FORMAT, FP32, build.io, verdict.result(), details)

    return [Started(Written(FORMAT, FORMAT, build.io, details), finish)]


def script_details(build: Build) -> TorchScriptDetails:
    return TorchScriptDetails(method=TorchScriptMethod.TRACE if build.spec.trace else TorchScriptMethod.SCRIPT)


def script(build: Build, name: str, module: nn.Module, details: TorchScriptDetails) -> Any:
    """Script (or trace, on the example batch: in float16 where the artifact takes float16, `details.fp16_io`)
    `module` as artifact `name`, saved and loaded back; a trace's warnings are kept in `details`."""
    with build.steps(f"{details.method} {name}", name):
        if build.spec.trace:
            args = tuple(t.half() if details.fp16_io and t.is_floating_point() else t for t in build.example)
            scripted, details.tracer_warnings = trace_module(module, args)
        else:
            scripted = script_module(module)
        return save_and_reload(scripted, build.path(name))


TORCHSCRIPT = register_format(FormatExporter(FORMAT, start, order=0))
