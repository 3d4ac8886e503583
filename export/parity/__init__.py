"""The parity engine: run a reference and a candidate on the same inputs and judge every output.

Everything others need is re-exported here. Importing it is cheap: torch and onnxruntime are imported only by
the runners that use them.
"""

from modelship.contract.parity_report import OutputMetrics, ParityReport
from modelship.export.parity.engine import compare_runners
from modelship.export.parity.golden import load_golden, save_golden
from modelship.export.parity.inputs import input_sets, random_inputs
from modelship.export.parity.isolation import IsolatedRunner
from modelship.export.parity.metrics import compare_arrays
from modelship.export.parity.report import render_table
from modelship.export.parity.runners import GoldenRunner, OnnxRuntimeRunner, Runner, TorchRunner, make_session
from modelship.export.parity.tolerance import Tolerance, ToleranceConfig, ToleranceOverrides

__all__ = [
    "GoldenRunner",
    "IsolatedRunner",
    "OnnxRuntimeRunner",
    "OutputMetrics",
    "ParityReport",
    "Runner",
    "Tolerance",
    "ToleranceConfig",
    "ToleranceOverrides",
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
