"""ONNX (`--onnx`): how Triton serves its graph (model.onnx, whose flag and file the contract registers with
the built-in formats: contract.artifacts). The graph itself is written by graph.py, through exporter.py; runner.py
loads it for `modelship parity`; its fp16 and INT8 variants are export.precision's."""

from modelship.contract.artifacts import EXPORT_FILES, ONNX
from modelship.export.formats.registry import register_served

FORMAT = ONNX
FILE = EXPORT_FILES.find(FORMAT)

register_served(FORMAT, platform="onnxruntime_onnx", file=FILE)
