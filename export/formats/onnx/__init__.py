"""ONNX (`--onnx`): its facts, registered without importing torch: the flag, the file its graph is written to
(model.onnx) and how Triton serves it. The graph itself is written by graph.py, through exporter.py; runner.py
loads it for `modelship parity`; its fp16 and INT8 variants are export.precision's."""

from modelship.contract.artifacts import ExportFormat, register_artifact_format, register_export_format
from modelship.export.formats.registry import register_served

FORMAT = "onnx"
FILE = "model.onnx"

register_export_format(
    ExportFormat(
        FORMAT,
        "ONNX",
        "Export ONNX (model.onnx). Neither format flag: both, or what the model kind exports.",
        default=True,
        order=1,
    )
)
register_artifact_format(FORMAT, {FORMAT: FILE})
register_served(FORMAT, platform="onnxruntime_onnx", file=FILE)
