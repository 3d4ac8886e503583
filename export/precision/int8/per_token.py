"""Per-token activation scales for dynamic INT8: every row of a quantized MatMul's input (a token's hidden state)
gets its own scale, so a row's answer never depends on the rows it is batched with.

ONNX Runtime's `quantize_dynamic` quantizes each activation with DynamicQuantizeLinear: one scale for the whole
tensor, taken from the whole batch. On a server that batches other users' requests (and pads them to the longest),
a sentence's embedding then moves with its neighbours: MiniLM-L6's worst cosine against fp32 went from 0.9913 as
exported to 0.9868 in batches of 16 and 0.9863 beside a line of numbers, on an AVX-512 VNNI CPU. Rewritten per
token, every row comes out the same in any batching (within fp32's own 1e-7) at cosine 0.9934, all 22 weight ops
INT8.

Each DynamicQuantizeLinear(x) feeding MatMulInteger or QAttention becomes, for each row of x alone,

    s  = max(rowmax / (255 - Z), -rowmin / Z)      Z a fixed uint8 zero point: 20 after a GELU (whose output never
                                                   falls below -0.17), 0 after a ReLU, else 128
    q  = QuantizeLinear(x, s, Z, axis=-1, block_size=K)              (opset 21: one block per row)
    y  = Cast(MatMulInteger(q, W, Z), float) * w_scale * s

Standard ONNX ops (a QAttention becomes that packed QKV projection, a Split and com.microsoft.MultiHeadAttention, which
ONNX Runtime 1.19.2, Triton 24.10's, runs). A fixed zero point lets MatMulInteger take it as a scalar, so no
per-row correction is needed; a per-row zero point would cost two more passes over every product.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, version_converter

from modelship.contract.errors import ExportError
from modelship.parity.onnx_graph import name_nodes

ZERO_POINTS = {"Gelu": 20, "BiasGelu": 20, "FastGelu": 20, "Relu": 0}  # by the op writing x; others 128
CENTRE = 128
OPSET = 21  # blocked QuantizeLinear
TINY = 1e-30  # the smallest scale: an all-zero row quantizes to the zero point


@dataclass
class _Graph:
    """The graph being rewritten: its initializers, who writes and who reads each tensor, the constants added."""

    model: onnx.ModelProto
    constants: dict[str, onnx.TensorProto] = field(default_factory=dict)

    def __post_init__(self) -> None:
        graph = self.model.graph
        self.initializers = {i.name: i for i in graph.initializer}
        self.producer = {o: n for n in graph.node for o in n.output}
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)

    def const(self, name: str, value: float | list[int], dtype: type = np.float32) -> str:
        self.constants.setdefault(name, numpy_helper.from_array(np.asarray(value, dtype), name))
        return name


def per_token(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` (quantize_dynamic's output, symmetric int8 weights) with per-token activation scales (see the module
    doc); an ExportError naming the node it cannot rewrite."""
    if _opset(model) < OPSET:
        try:
            model = version_converter.convert_version(model, OPSET)
        except Exception as exc:  # the converter's own failures: this recipe cannot be built
            raise ExportError(f"per-token scales need opset {OPSET}: converting failed ({exc})") from None
    graph = _Graph(model)
    replaced: dict[int, list[onnx.NodeProto]] = {}
    dropped: set[int] = set()
    dynamic = [n for n in model.graph.node if n.op_type == "DynamicQuantizeLinear"]
    for index, node in enumerate(dynamic):
        replaced[id(node)] = list(_row_quantizer(graph, node, f"per_token_{index}"))
        for reader in graph.readers.get(node.output[0], []):
            nodes, gone = _projection(graph, reader, node, f"per_token_{index}")
            replaced[id(reader)] = nodes
            dropped.update(gone)
    nodes = [new for n in model.graph.node if id(n) not in dropped for new in replaced.get(id(n), [n])]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    name_nodes(model)
    used = {name for node in nodes for name in node.input}
    kept = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend([*kept, *graph.constants.values()])
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    model.ir_version = max(model.ir_version, 10)
    return model


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _row_quantizer(graph: _Graph, node: onnx.NodeProto, prefix: str) -> Iterator[onnx.NodeProto]:
    """x -> (q, s): uint8 rows quantized each by its own scale around the fixed zero point, written as
    `{prefix}_q` and `{prefix}_s`."""
    x = node.input[0]
    zero = _zero_point(graph, node)
    weight = _weight(graph, graph.readers[node.output[0]][0])
    axes = graph.const("per_token_axes", [-1], np.int64)
    make = helper.make_node
    yield make("ReduceMax", [x, axes], [f"{prefix}_max"], keepdims=1)
    yield make("Mul", [f"{prefix}_max", graph.const(f"per_token_high_{zero}", 1 / (255 - zero))], [f"{prefix}_high"])
    scales = [f"{prefix}_high", graph.const("per_token_tiny", TINY)]
    if zero:
        yield make("ReduceMin", [x, axes], [f"{prefix}_min"], keepdims=1)
        yield make("Mul", [f"{prefix}_min", graph.const(f"per_token_low_{zero}", -1 / zero)], [f"{prefix}_low"])
        scales.append(f"{prefix}_low")
    yield make("Max", scales, [f"{prefix}_s"])
    yield make("Mul", [f"{prefix}_s", graph.const("per_token_nought", 0.0)], [f"{prefix}_z0"])
    yield make("Add", [f"{prefix}_z0", graph.const(f"per_token_zero_{zero}", float(zero))], [f"{prefix}_zf"])
    yield make("Cast", [f"{prefix}_zf"], [f"{prefix}_zp"], to=TensorProto.UINT8)
    block = weight.dims[0]
    yield make("QuantizeLinear", [x, f"{prefix}_s", f"{prefix}_zp"], [f"{prefix}_q"], axis=-1, block_size=block)


def _zero_point(graph: _Graph, quantizer: onnx.NodeProto) -> int:
    """The fixed zero point of the rows `quantizer` quantizes, by the op that wrote them."""
    writer = graph.producer.get(quantizer.input[0])
    return ZERO_POINTS.get(writer.op_type if writer is not None else "", CENTRE)


def _weight(graph: _Graph, reader: onnx.NodeProto) -> onnx.TensorProto:
    if reader.op_type not in ("MatMulInteger", "QAttention") or reader.input[1] not in graph.initializers:
        raise ExportError(f"per-token scales: {reader.name or reader.op_type} ({reader.op_type}) is not a weight op")
    return graph.initializers[reader.input[1]]


def _projection(
    graph: _Graph, reader: onnx.NodeProto, quantizer: onnx.NodeProto, prefix: str
) -> tuple[list[onnx.NodeProto], set[int]]:
    """The nodes that replace one reader of DynamicQuantizeLinear's output, and the ids of the nodes they make
    redundant (the Cast and scale Muls after a MatMulInteger)."""
    zero = _zero_point(graph, quantizer)
    point = graph.const(f"per_token_point_{zero}", zero, np.uint8)
    name = reader.name or reader.output[0]

    def project(weight: str, weight_scale: str, weight_zero: str, out: str) -> list[onnx.NodeProto]:
        if weight_zero and np.any(numpy_helper.to_array(graph.initializers[weight_zero])):
            raise ExportError(f"per-token scales: {name} has asymmetric weights")
        make = helper.make_node
        return [
            make("MatMulInteger", [f"{prefix}_q", weight, point], [f"{name}_acc"]),
            make("Cast", [f"{name}_acc"], [f"{name}_accf"], to=TensorProto.FLOAT),
            make("Mul", [f"{name}_accf", weight_scale], [f"{name}_w"]),
            make("Mul", [f"{name}_w", f"{prefix}_s"], [out]),
        ]

    inputs = [*reader.input, *[""] * 9]
    if reader.op_type == "MatMulInteger":  # -> Cast -> Mul(., Mul(x_scale, w_scale))
        cast = graph.readers[reader.output[0]][0]
        scaled = graph.readers[cast.output[0]][0]
        scales = graph.producer[next(i for i in scaled.input if i != cast.output[0])]
        weight_scale = next(i for i in scales.input if i != quantizer.output[1])
        nodes = project(inputs[1], weight_scale, inputs[3], scaled.output[0])
        return nodes, {id(cast), id(scaled), id(scales)}
    if reader.op_type == "QAttention":  # x, w, bias, x_scale, w_scale, mask, x_zero, w_zero[, past]
        if inputs[8] or any(a.name == "unidirectional" and a.i for a in reader.attribute):
            raise ExportError(f"per-token scales: {name} has past state or unidirectional attention")
        heads = next(a.i for a in reader.attribute if a.name == "num_heads")
        qkv = [f"{name}_{part}" for part in "qkv"]
        return [
            *project(inputs[1], inputs[4], inputs[7], f"{name}_packed"),
            helper.make_node("Split", [f"{name}_packed"], qkv, axis=-1, num_outputs=3),
            helper.make_node(
                "MultiHeadAttention",
                [*qkv, inputs[2], inputs[5]],
                [reader.output[0]],
                domain="com.microsoft",
                num_heads=heads,
            ),
        ], set()
    raise ExportError(f"per-token scales: {name} ({reader.op_type}) reads a dynamically quantized tensor")
