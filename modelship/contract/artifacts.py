"""The registries of artifact kinds, which a manifest is read back against: the formats export-model writes (and the
flag that asks for each), the artifacts of each format a manifest may hold, and the file each is written to.

The built-in formats' entries are registered here, at the bottom of the layers, so a manifest reads back wherever it
is read (a script of the user's that imports only this layer included); everything else of a format (its exporter,
runner and Triton fragment) is its package's under export/formats/, which adds a new format's entries from there. A
format's variants at other precisions (their files, steps, options) are registered in export.precision.registry,
which adds their files to EXPORT_FILES.
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
    """A format's fp32 artifacts and the file each is written to in the export folder (a format's package calls this
    beside `register_export_format`)."""
    ARTIFACT_FORMATS.add(artifact_format, tuple(files), replace=replace)
    for name, file in files.items():
        EXPORT_FILES.add(name, file, replace=replace)


GOLDEN_FILE = "golden.npz"  # the verification inputs and eager outputs, beside the artifacts
SIDECAR_FILE = "checkpoint.json"  # the checkpoint's sidecar metadata, copied into the export


TORCHSCRIPT, ONNX, PT2, AOTI = "torchscript", "onnx", "pt2", "aoti"
register_export_format(
    ExportFormat(
        TORCHSCRIPT,
        "TorchScript",
        "Export TorchScript (model.pt). Neither format flag: both, or what the model kind exports (ONNX alone for a "
        "Hugging Face folder: transformers models do not script).",
        default=True,
        order=0,
    )
)
register_export_format(
    ExportFormat(
        ONNX,
        "ONNX",
        "Export ONNX (model.onnx). Neither format flag: both, or what the model kind exports.",
        default=True,
        order=1,
    )
)
register_export_format(
    ExportFormat(
        PT2,
        "torch.export",
        "Also export with torch.export: the ExportedProgram (model.pt2) and an AOTInductor package compiled from it "
        "(model.aoti.pt2), both verified. Publishing them needs a Triton whose PyTorch backend loads torch_aoti.",
        order=2,
    )
)
# a manifest lists the formats' artifacts in the order they registered: TorchScript's, ONNX's, then torch.export's
register_artifact_format(TORCHSCRIPT, {TORCHSCRIPT: "model.pt"})
register_artifact_format(ONNX, {ONNX: "model.onnx"})
register_artifact_format(PT2, {PT2: "model.pt2"})
register_artifact_format(AOTI, {AOTI: "model.aoti.pt2"})
