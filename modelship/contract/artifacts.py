"""Artifact kinds, written once: the formats an export can hold, the file each artifact is written to, the file
Triton's backend loads for each servable format, and the ONNX Runtime setting every fp16 session needs."""

from __future__ import annotations

from modelship.contract.registry import Registry

DEFAULT_FORMATS = ("torchscript", "onnx")  # pt2 only when asked (--pt2): an AOTInductor compile takes a while
ARTIFACT_FORMATS: Registry[tuple[str, ...]] = Registry("artifact format")  # a manifest's `format` -> its artifacts
EXPORT_FILES: Registry[str] = Registry("artifact")  # artifact name -> its file (also the manifest's artifact order)


def register_artifact_format(artifact_format: str, files: dict[str, str]) -> None:
    """A format's artifacts and the file each is written to in the export folder (a new format's module calls
    this beside `export.formats.register_format`)."""
    ARTIFACT_FORMATS.add(artifact_format, tuple(files))
    for name, file in files.items():
        EXPORT_FILES.add(name, file)


register_artifact_format("torchscript", {"torchscript": "model.pt", "torchscript_fp16": "model.fp16.pt"})
register_artifact_format("onnx", {"onnx": "model.onnx", "onnx_fp16": "model.fp16.onnx"})
register_artifact_format("pt2", {"pt2": "model.pt2"})
register_artifact_format("aoti", {"aoti": "model.aoti.pt2"})
SERVED_FILES = {"onnx": "model.onnx", "torchscript": "model.pt"}  # format -> the file Triton's backend loads
PLATFORMS = {"onnx": "onnxruntime_onnx", "torchscript": "pytorch_libtorch"}  # format -> Triton platform
# ONNX Runtime 1.31 segfaults creating a CPU session for some fp16 graphs (vit_b_16) unless this optimizer is off:
# every fp16 session (parity, the stand-in backend via the published config) disables it.
FP16_DISABLED_OPTIMIZERS = ("NchwcTransformer",)
GOLDEN_FILE = "golden.npz"  # the verification inputs and eager outputs, beside the artifacts
SIDECAR_FILE = "checkpoint.json"  # the checkpoint's sidecar metadata, copied into the export
