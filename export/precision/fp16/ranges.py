"""fp16 verdicts that hold where fp16 really runs: measured ranges decide which nodes stay fp32, and verification runs
a graph that rounds to float16 at every node boundary.

ONNX Runtime's CPU provider has no float16 kernels for most operators and fuses the casts it inserts, so an fp16
graph run there computes in float32 and never overflows (a block squaring activations to 1e7 passes on the CPU and
returns NaN on a GPU). Here:

- `intermediate_ranges` runs the fp32 graph with every float intermediate exposed (parity.probe), on the
  verification inputs, and records each tensor's largest magnitude;
- `out_of_range_nodes` keeps in fp32 every node that writes or reads a tensor outside float16's range (beyond
  FP16_MAX / HEADROOM, or non-zero but entirely below FP16_TINY, where it would flush to zero);
- `emulate_fp16` writes the fp32 graph with weights rounded to float16 and a Cast to float16 and back after every
  node that the fp16 artifact computes in fp16: what a GPU running the artifact stores between operators. ONNX
  Runtime runs those casts as written (checked: the squaring block gives NaN there, as on a GPU).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from modelship.contract.artifact_details import KeptNode
from modelship.contract.tensors import Tensors
from modelship.parity.onnx_graph import float_tensors, node_module, tensor_types
from modelship.parity.probe import Probe

FP16_MAX = float(np.finfo(np.float16).max)  # 65504
FP16_TINY = float(np.finfo(np.float16).tiny)  # 2**-14, the smallest normal: a tensor entirely below it flushes
HEADROOM = 2.0  # keep a node fp32 once its values reach half of float16's range: other inputs go further


def intermediate_ranges(proto: onnx.ModelProto, input_sets: Sequence[Tensors]) -> dict[str, float]:
    """{tensor: max |x| over `input_sets`} for every float tensor a node writes (non-finite values ignored)."""
    probe = Probe(proto, float_tensors(proto))
    largest: dict[str, float] = {}
    for inputs in input_sets:
        for name, value in probe.run(inputs).items():
            largest[name] = max(largest.get(name, 0.0), _largest_finite(value))
    return largest


def _largest_finite(value: np.ndarray) -> float:
    """max |x| over the finite values (0 for none); two reductions and no copy when all are finite."""
    if not value.size:
        return 0.0
    top = max(abs(float(value.max())), abs(float(value.min())))
    if np.isfinite(top):
        return top
    finite = np.abs(value[np.isfinite(value)])
    return float(finite.max()) if finite.size else 0.0


def out_of_range_nodes(proto: onnx.ModelProto, ranges: dict[str, float]) -> list[KeptNode]:
    """Nodes to keep in fp32: every producer and consumer of a tensor outside float16's range."""
    producers = {o: n for n in proto.graph.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in proto.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    kept: dict[str, KeptNode] = {}
    for tensor, largest in ranges.items():
        if largest > FP16_MAX / HEADROOM:
            reason = f"{tensor} reaches |x| = {largest:.3g}, past float16's {FP16_MAX:g} / {HEADROOM:g} headroom"
        elif 0 < largest < FP16_TINY:
            reason = f"{tensor} stays below |x| = {largest:.3g}, under float16's smallest normal {FP16_TINY:.3g}"
        else:
            continue
        for node in [producers[tensor], *consumers.get(tensor, [])] if tensor in producers else []:
            kept.setdefault(node.name, KeptNode(node.name, node.op_type, node_module(node), reason))
    return list(kept.values())


def emulate_fp16(proto: onnx.ModelProto, fp32_nodes: Iterable[str], fp32_ops: Iterable[str]) -> onnx.ModelProto:
    """The fp32 graph rounding to float16 where the fp16 artifact stores float16: weights, graph inputs and the
    outputs of every node not in `fp32_nodes` (names), `fp32_ops` (the block list it was converted with) or the ops
    the converter always leaves in fp32."""
    model = copy.deepcopy(proto)
    graph = model.graph
    types = tensor_types(model)
    kept_nodes, kept_ops = set(fp32_nodes), {*fp32_ops, *unsupported_ops()}

    def computed_in_fp16(node: onnx.NodeProto) -> bool:
        return node.name not in kept_nodes and node.op_type not in kept_ops

    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT and any(computed_in_fp16(n) for n in users.get(init.name, [])):
            with np.errstate(over="ignore"):  # a constant beyond fp16 (an attention mask's float32 min) becomes inf
                rounded = numpy_helper.to_array(init).astype(np.float16).astype(np.float32)
            init.CopyFrom(numpy_helper.from_array(rounded, init.name))
    nodes: list[onnx.NodeProto] = []
    for graph_input in graph.input:
        if types.get(graph_input.name) == TensorProto.FLOAT:
            casts = _round(graph_input.name, f"{graph_input.name}__fp16")
            for user in users.get(graph_input.name, []):
                if computed_in_fp16(user):
                    user.input[:] = [f"{graph_input.name}__fp16" if i == graph_input.name else i for i in user.input]
            nodes += casts
    for node in graph.node:
        rounding = []
        if computed_in_fp16(node):
            for index, name in enumerate(node.output):
                if types.get(name) == TensorProto.FLOAT:
                    node.output[index] = f"{name}__fp32"
                    rounding += _round(f"{name}__fp32", name)
        nodes += [node, *rounding]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return model


def _round(source: str, target: str) -> list[onnx.NodeProto]:
    return [
        helper.make_node("Cast", [source], [f"{target}__h"], to=TensorProto.FLOAT16, name=f"{target}__to_fp16"),
        helper.make_node("Cast", [f"{target}__h"], [target], to=TensorProto.FLOAT, name=f"{target}__to_fp32"),
    ]


def unsupported_ops() -> tuple[str, ...]:
    """Op types ONNX Runtime's converter always leaves in fp32 (no fp16 kernels): its DEFAULT_OP_BLOCK_LIST."""
    from onnxruntime.transformers import float16

    return tuple(float16.DEFAULT_OP_BLOCK_LIST)
