"""The parity engine: run a reference and a candidate on the same inputs and judge every output.

Everything others need is re-exported here. Importing it is cheap: torch and onnxruntime are imported only by
the runners that use them.
"""

from modelship.contract.parity_report import OutputMetrics, ParityReport
from modelship.parity import box_compare, mask_compare
from modelship.parity.compare import COMPARE_FUNCTIONS, CompareFunction, compare_function, register_compare
from modelship.parity.engine import (
    RunResults,
    compare_results,
    compare_runners,
    judge_runner,
    reference_results,
    run_sets,
)
from modelship.parity.golden import load_golden, save_golden
from modelship.parity.inputs import input_sets, random_inputs
from modelship.parity.isolation import IsolatedRunner
from modelship.parity.metrics import compare_arrays
from modelship.parity.runner_protocol import BaseRunner, Runner
from modelship.parity.runners import GoldenRunner, OnnxRuntimeRunner, TorchRunner, make_session, reference_runner
from modelship.parity.table import render_table
from modelship.parity.tolerance import Tolerance, ToleranceConfig, ToleranceOverrides

__all__ = [
    "COMPARE_FUNCTIONS",
    "BaseRunner",
    "CompareFunction",
    "GoldenRunner",
    "IsolatedRunner",
    "OnnxRuntimeRunner",
    "OutputMetrics",
    "ParityReport",
    "RunResults",
    "Runner",
    "Tolerance",
    "ToleranceConfig",
    "ToleranceOverrides",
    "TorchRunner",
    "box_compare",
    "compare_arrays",
    "compare_function",
    "compare_results",
    "compare_runners",
    "input_sets",
    "judge_runner",
    "load_golden",
    "make_session",
    "mask_compare",
    "random_inputs",
    "reference_results",
    "reference_runner",
    "register_compare",
    "render_table",
    "run_sets",
    "save_golden",
]
