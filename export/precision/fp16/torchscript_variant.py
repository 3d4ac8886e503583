"""The TorchScript fp16 variant (`torchscript_fp16`): a half copy of the eager model (float32 I/O with the casts
inside unless `--fp16-io`), scripted or traced like the fp32 module (export.formats.torchscript.exporter.script) and
verified on `build.background`. Half precision really computes on the CPU, so a failing verdict holds as is: the
modules whose own half computation diverges on the batch that failed are kept in fp32 (`torchscript_keep_modules`)
and it is built and verified again."""

from __future__ import annotations

from typing import Any

import torch

from modelship.contract.artifact_details import KeptModule, TorchScriptDetails
from modelship.contract.parity_report import ParityReport
from modelship.export.build import Build, BuiltArtifact, Finish, Written, float_io
from modelship.export.formats.torchscript import FORMAT
from modelship.export.formats.torchscript.exporter import script, script_details
from modelship.export.precision.fp16.convert import fp16_keep_modules, half_module, half_with_float_io
from modelship.export.precision.fp16.options import Fp16Options
from modelship.parity import TorchRunner

NAME = "torchscript_fp16"
PRECISION = "fp16"


def start_torchscript_fp16(build: Build, written: Written) -> Finish:
    """The variant of the fp32 module `written`, scripted now, verified on `build.background`; returns what waits
    for its verdict (and builds it again keeping the diverging modules in fp32 when it fails)."""
    fp16 = build.spec.options_for(Fp16Options)
    io = float_io(written.io, "float16", inputs=fp16.io, outputs=fp16.io)
    details = script_details(build)
    details.fp16_io, details.fp16_keep = fp16.io, list(fp16.keep)
    runner = TorchRunner(_script_half(build, details, list(fp16.keep)), io, name=NAME)
    verdict = build.background.submit(build.verify, NAME, runner, PRECISION)

    def finish() -> BuiltArtifact:
        report = verdict.result()
        if not report.passed:
            kept = torchscript_keep_modules(build, report)
            if kept:
                details.kept_fp32_modules = kept
                keep = [*fp16.keep, *(k.module for k in kept)]
                runner = TorchRunner(_script_half(build, details, keep), io, name=NAME)
                report = build.verify(NAME, runner, PRECISION)
        return BuiltArtifact(NAME, FORMAT, PRECISION, io, report, details)

    return finish


def _script_half(build: Build, details: TorchScriptDetails, keep: list[str]) -> Any:
    """The half copy of the model keeping `keep` in fp32 (taking and giving float32 unless `details.fp16_io`),
    scripted or traced, saved and loaded back."""
    if details.fp16_io:
        module = half_module(build.model, keep)
    else:
        module = half_with_float_io(build.model, build.io, build.example, keep)
    return script(build, NAME, module, details)


def torchscript_keep_modules(build: Build, report: ParityReport) -> list[KeptModule]:
    """The modules to keep in fp32 in the variant that failed, measured on the batch it failed."""
    failed = build.verification.inputs[report.first_failed_set()]
    with build.steps("measure fp16 ranges", NAME):
        batch = tuple(torch.from_numpy(failed[t.name]) for t in build.io.inputs)
        return fp16_keep_modules(build.model, [batch])
