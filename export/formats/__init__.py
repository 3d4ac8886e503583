"""The formats export-model writes, each whole in its own package:

    onnx/         torch.onnx at the target Triton's opset (graph.py), its exporter, its runner
    torchscript/  torch.jit script or trace (jit.py), its exporter, its runner
    pt2/          torch.export's program and its AOTInductor package (program.py), its exporter, its runner
    registry.py   what a format registers besides the contract's facts: its exporter, runner and Triton fragment
    exporters.py  the built-in exporters, in the order they start (`exporters_for`)
    runners.py    the runner of an artifact file of an export (`artifact_runner`)

The contract registers the built-in formats' flags and artifact files (contract.artifacts), so a manifest reads back
wherever it is read; a format package's `__init__` registers how Triton serves its artifacts (registry.register_served),
without importing torch; a new format's package also registers its flag and files
(contract.artifacts.register_export_format, register_artifact_format). Read them from here (`export_format_flags`,
`default_formats`, `format_title`, `SERVED_FILES`, `PLATFORMS`). Its `exporter.py` registers `start`
(registry.register_format) and its `runner.py` the loader `modelship parity` runs its files with
(registry.register_artifact_runner). A format's variants at other precisions are export.precision's. Adding a
format is one such package (tests/test_format_registry.py adds one from inside a test).
"""

from modelship.contract.artifacts import default_formats, export_format_flags, format_title
from modelship.export.formats import onnx, pt2, torchscript  # noqa: F401 (their Triton fragments register)
from modelship.export.formats.registry import PLATFORMS, SERVED_FILES

__all__ = ["PLATFORMS", "SERVED_FILES", "default_formats", "export_format_flags", "format_title"]
