"""TorchScript (`--torchscript`): its facts, registered without importing torch: the flag, the file its module is
written to (model.pt) and how Triton serves it. The module is scripted or traced by jit.py, through exporter.py;
runner.py loads it for `modelship parity`; its fp16 variant is export.precision.fp16's."""

from modelship.contract.artifacts import ExportFormat, register_artifact_format, register_export_format
from modelship.export.formats.registry import register_served

FORMAT = "torchscript"
FILE = "model.pt"

register_export_format(
    ExportFormat(
        FORMAT,
        "TorchScript",
        "Export TorchScript (model.pt). Neither format flag: both, or what the model kind exports (ONNX alone for a "
        "Hugging Face folder: transformers models do not script).",
        default=True,
        order=0,
    )
)
register_artifact_format(FORMAT, {FORMAT: FILE})
register_served(FORMAT, platform="pytorch_libtorch", file=FILE)
