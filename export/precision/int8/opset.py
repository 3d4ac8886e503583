"""Which op types a static recipe quantizes in a graph, and what ONNX Runtime leaves of its Q/DQ pairs.

Quantizing only the weight ops (Conv, MatMul, Gemm) leaves everything between them float: each convolution's output
is calibrated at its range *before* the activation that follows (a ReLU6 `Clip` halves it or less), and every
float Add, Clip or pooling between two integer convolutions keeps a QuantizeLinear/DequantizeLinear pair that ONNX
Runtime cannot fuse (EfficientNet-Lite0: about 34 pairs left, 1.1x fp32). The op set ONNX Runtime fuses
(`fused_ops`) is every op type of the graph its quantizer registers for QDQ or as an integer operator (its
`op_types_to_quantize` default): activations folded into the producing convolution's range, Add, Mul, Concat,
pooling, Resize, ... (49 integer convolutions and 2 pairs left on the same model, 2.35x).

What stays is read off the graph ONNX Runtime actually runs (`optimised`: the session writes it through
`SessionOptions.optimized_model_filepath`), not inferred.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import onnx

from modelship.export.precision.int8.recipe import WEIGHT_OPS

INTEGER_OPS = ("QGemm", "MatMulInteger", "ConvInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QAttention")


def fused_ops(model: onnx.ModelProto) -> tuple[str, ...]:
    """The op types of `model` ONNX Runtime's static quantizer quantizes by default (its QDQ and integer-operator
    registries), the weight ops first, the rest in name order."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    present = {node.op_type for node in model.graph.node}
    registered = (set(QDQRegistry) | set(QLinearOpsRegistry)) & present
    return (*(op for op in WEIGHT_OPS if op in registered), *sorted(registered - set(WEIGHT_OPS)))


@dataclass(frozen=True)
class Optimised:
    """What ONNX Runtime's CPU provider runs of a quantized graph: the QuantizeLinear/DequantizeLinear pairs it could
    not fuse (counted by their QuantizeLinear) and the integer operators it runs."""

    pairs_left: int
    integer_ops: int


def optimised(path: Path) -> Optimised:
    """Count what ONNX Runtime runs of the quantized graph at `path` after its graph optimisations (all levels, the
    CPU provider, as the serving backend runs it)."""
    import onnxruntime as ort

    from modelship.parity import make_session

    with tempfile.TemporaryDirectory(prefix="modelship-optimised-") as scratch:
        written = Path(scratch) / "optimised.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(written)
        options.log_severity_level = 3  # its warning that the file is for this CPU only: it is only counted
        make_session(path, ["CPUExecutionProvider"], session_options=options)
        ops = Counter(node.op_type for node in onnx.load(str(written), load_external_data=False).graph.node)
    integer = sum(count for op, count in ops.items() if op.startswith("QLinear") or op in INTEGER_OPS)
    return Optimised(ops["QuantizeLinear"], integer)
