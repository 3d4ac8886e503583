"""Artifact kinds, written once: the formats an export can hold, the file each artifact is written to, the file
Triton's backend loads for each servable format, and the ONNX Runtime setting every fp16 session needs."""

from __future__ import annotations

EXPORT_FORMATS = ("torchscript", "onnx", "pt2")  # what export-model can be asked for
DEFAULT_FORMATS = ("torchscript", "onnx")  # pt2 only when asked (--pt2): an AOTInductor compile takes a while
ARTIFACT_FORMATS = ("torchscript", "onnx", "pt2", "aoti")  # the `format` of a manifest's artifacts
EXPORT_FILES = {  # artifact name -> its file in the export folder (also the manifest's artifact order)
    "torchscript": "model.pt",
    "torchscript_fp16": "model.fp16.pt",
    "onnx": "model.onnx",
    "onnx_fp16": "model.fp16.onnx",
    "pt2": "model.pt2",
    "aoti": "model.aoti.pt2",
}
SERVED_FILES = {"onnx": "model.onnx", "torchscript": "model.pt"}  # format -> the file Triton's backend loads
PLATFORMS = {"onnx": "onnxruntime_onnx", "torchscript": "pytorch_libtorch"}  # format -> Triton platform
# ONNX Runtime 1.31 segfaults creating a CPU session for some fp16 graphs (vit_b_16) unless this optimizer is off:
# every fp16 session (parity, the stand-in backend via the published config) disables it.
FP16_DISABLED_OPTIMIZERS = ("NchwcTransformer",)
GOLDEN_FILE = "golden.npz"  # the verification inputs and eager outputs, beside the artifacts
SIDECAR_FILE = "checkpoint.json"  # the checkpoint's sidecar metadata, copied into the export
