"""torch.export's exporter (`--pt2`): the ExportedProgram (model.pt2) and the AOTInductor package compiled from it
(model.aoti.pt2, program.py), each verified like the rest."""

from __future__ import annotations

from modelship.contract.artifact_details import AotiDetails, Pt2Details
from modelship.contract.precisions import FP32
from modelship.export.build import Build, BuiltArtifact, Finish, Started, Written
from modelship.export.formats.pt2 import AOTI, FORMAT
from modelship.export.formats.pt2.program import compile_aoti, export_program, save_program
from modelship.export.formats.registry import FormatExporter, register_format
from modelship.parity import TorchRunner


def start(build: Build) -> list[Started]:
    io = build.io
    with build.steps("torch.export pt2", FORMAT):
        program = export_program(build.model, build.example, io)
        module = save_program(program, build.path(FORMAT))
    report = build.verify(FORMAT, TorchRunner(module, io, name=FORMAT), FP32)
    program_built = BuiltArtifact(FORMAT, FORMAT, FP32, io, report, Pt2Details())
    with build.steps("compile aoti", AOTI):
        package = compile_aoti(program, build.path(AOTI))
    report = build.verify(AOTI, TorchRunner(package, io, name=AOTI), FP32)
    package_built = BuiltArtifact(AOTI, AOTI, FP32, io, report, AotiDetails())
    return [Started(Written(b.name, b.format, b.io, b.details), _done(b)) for b in (program_built, package_built)]


def _done(built: BuiltArtifact) -> Finish:
    return lambda: built


PT2 = register_format(FormatExporter(FORMAT, start, order=1))
