"""torch.export (`--pt2`): its facts, registered without importing torch: the flag and its two artifacts, the
ExportedProgram (model.pt2) and the AOTInductor package compiled from it (model.aoti.pt2). Neither is served by the
Triton releases modelship targets, so neither has a Triton fragment. program.py makes them, through exporter.py;
runner.py loads them for `modelship parity`."""

from modelship.contract.artifacts import ExportFormat, register_artifact_format, register_export_format

FORMAT = "pt2"
AOTI = "aoti"

register_export_format(
    ExportFormat(
        FORMAT,
        "torch.export",
        "Also export with torch.export: the ExportedProgram (model.pt2) and an AOTInductor package compiled from it "
        "(model.aoti.pt2), both verified. Publishing them needs a Triton whose PyTorch backend loads torch_aoti.",
        order=2,
    )
)
register_artifact_format(FORMAT, {FORMAT: "model.pt2"})
register_artifact_format(AOTI, {AOTI: "model.aoti.pt2"})
