"""Artifact kinds, written once: the formats export-model writes (and the flag that asks for each), the file each
fp32 artifact is written to, the file Triton's backend loads for each servable format, and the ONNX Runtime setting
every fp16 session needs.

Everything here is declared without importing torch, so the command line (flags, `--help`, choices) is generated
from it as it is parsed. A format's variants at other precisions (their files, steps, options) are registered in
the export layer (export.precision.registry), which adds their files to EXPORT_FILES.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelship.contract.registry import Registry

ARTIFACT_FORMATS: Registry[tuple[str, ...]] = Registry("artifact format")  # a manifest's `format` -> its artifacts
EXPORT_FILES: Registry[str] = Registry("artifact")  # artifact name -> its file in the export folder


@dataclass(frozen=True)
class ExportFormat:
    """A format export-model writes: `name` (its flag is `--<name>`), `title` for messages, the flag's `help`,
    whether a plain `export-model` (no format flag) writes it, and `order`: where its flag is listed."""

    name: str
    title: str
    help: str
    default: bool = False
    order: int = 100

    @property
    def flag(self) -> str:
        return f"--{self.name.replace('_', '-')}"


EXPORT_FORMATS: Registry[ExportFormat] = Registry("export format")


def register_export_format(export_format: ExportFormat, *, replace: bool = False) -> ExportFormat:
    return EXPORT_FORMATS.add(export_format.name, export_format, replace=replace)


def export_format_flags() -> list[ExportFormat]:
    return sorted(EXPORT_FORMATS.values(), key=lambda f: f.order)


def default_formats() -> tuple[str, ...]:
    """What export-model writes when no format flag says."""
    return tuple(f.name for f in export_format_flags() if f.default)


def format_title(name: str) -> str:
    return EXPORT_FORMATS[name].title if name in EXPORT_FORMATS else name


def register_artifact_format(artifact_format: str, files: dict[str, str], *, replace: bool = False) -> None:
    """A format's fp32 artifacts and the file each is written to in the export folder (a new format's module calls
    this beside `export.formats.register_format`)."""
    ARTIFACT_FORMATS.add(artifact_format, tuple(files), replace=replace)
    for name, file in files.items():
        EXPORT_FILES.add(name, file, replace=replace)


register_export_format(
    ExportFormat(
        "torchscript",
        "TorchScript",
        "Export TorchScript (model.pt). Neither format flag: both, or what the model kind exports (ONNX alone for a "
        "Hugging Face folder: transformers models do not script).",
        default=True,
        order=0,
    )
)
register_export_format(
    ExportFormat(
        "onnx",
        "ONNX",
        "Export ONNX (model.onnx). Neither format flag: both, or what the model kind exports.",
        default=True,
        order=1,
    )
)
register_export_format(
    ExportFormat(
        "pt2",
        "torch.export",
        "Also export with torch.export: the ExportedProgram (model.pt2) and an AOTInductor package compiled from it "
        "(model.aoti.pt2), both verified. Publishing them needs a Triton whose PyTorch backend loads torch_aoti.",
        order=2,
    )
)
register_artifact_format("torchscript", {"torchscript": "model.pt"})
register_artifact_format("onnx", {"onnx": "model.onnx"})
register_artifact_format("pt2", {"pt2": "model.pt2"})
register_artifact_format("aoti", {"aoti": "model.aoti.pt2"})
DEFAULT_FORMATS = default_formats()  # pt2 only when asked (--pt2): an AOTInductor compile takes a while
SERVED_FILES = {"onnx": "model.onnx", "torchscript": "model.pt"}  # format -> the file Triton's backend loads
PLATFORMS = {"onnx": "onnxruntime_onnx", "torchscript": "pytorch_libtorch"}  # format -> Triton platform
GOLDEN_FILE = "golden.npz"  # the verification inputs and eager outputs, beside the artifacts
SIDECAR_FILE = "checkpoint.json"  # the checkpoint's sidecar metadata, copied into the export
