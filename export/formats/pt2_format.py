"""torch.export (`--pt2`): the ExportedProgram (model.pt2) and the AOTInductor package compiled from it
(model.aoti.pt2), each verified like the rest."""

from __future__ import annotations

from modelship.contract.artifact_details import AotiDetails, Pt2Details
from modelship.export.build import Build, BuiltArtifact, Finish, Started, Written
from modelship.export.formats import FormatExporter, register_format
from modelship.export.pt2_export import compile_aoti, export_program, save_program
from modelship.parity import TorchRunner


def start(build: Build) -> list[Started]:
    io = build.io
    with build.steps("torch.export pt2", "pt2"):
        program = export_program(build.model, build.example, io)
        module = save_program(program, build.path("pt2"))
    report = build.verify("pt2", TorchRunner(module, io, name="pt2"), "fp32")
    program_built = BuiltArtifact("pt2", "pt2", "fp32", io, report, Pt2Details())
    with build.steps("compile aoti", "aoti"):
        package = compile_aoti(program, build.path("aoti"))
    report = build.verify("aoti", TorchRunner(package, io, name="aoti"), "fp32")
    package_built = BuiltArtifact("aoti", "aoti", "fp32", io, report, AotiDetails())
    return [Started(Written(b.name, b.format, b.io, b.details), _done(b)) for b in (program_built, package_built)]


def _done(built: BuiltArtifact) -> Finish:
    return lambda: built


PT2 = register_format(FormatExporter("pt2", start, order=1))
