"""The parity engine: run a reference and a candidate on the same inputs and judge every output.

Everything others need is re-exported here. Importing it is cheap: torch and onnxruntime are imported only by
the runners that use them.
"""

from export.parity.engine import compare_runners
from export.parity.golden import load_golden, save_golden
from export.parity.inputs import input_sets, random_inputs
from export.parity.isolation import IsolatedRunner
from export.parity.metrics import OutputMetrics, compare_arrays
from export.parity.report import ParityReport, render_table
from export.parity.runners import GoldenRunner, OnnxRuntimeRunner, Runner, TorchRunner, make_session
from export.parity.tolerance import Tolerance, ToleranceConfig

__all__ = [
    "GoldenRunner",
    "IsolatedRunner",
    "OnnxRuntimeRunner",
    "OutputMetrics",
    "ParityReport",
    "Runner",
    "Tolerance",
    "ToleranceConfig",
    "TorchRunner",
    "compare_arrays",
    "compare_runners",
    "input_sets",
    "load_golden",
    "make_session",
    "random_inputs",
    "render_table",
    "save_golden",
]
