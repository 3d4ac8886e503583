"""Reading an ONNX graph the way localisation and the precision variants need: which PyTorch module each node came
from, the type of every tensor, and one naming rule for nodes (the converters' block lists, the quantizer's
exclusions and every report refer to nodes by name)."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable

import onnx
from onnx import helper

SMALL_CONSTANT = 4096  # bytes: initializers up to this size keep their data for shape inference


def name_nodes(proto: onnx.ModelProto) -> None:
    """Give every node a unique name: a node without one, or with one an earlier node took, becomes
    `<op>_<index>` (with `_` appended until no other node has it)."""
    taken = {n.name for n in proto.graph.node if n.name}
    seen: set[str] = set()
    for index, node in enumerate(proto.graph.node):
        if not node.name or node.name in seen:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)
        seen.add(node.name)


def node_module(node: onnx.NodeProto) -> str:
    """The PyTorch module a node came from: the dynamo exporter's name scopes, else the legacy exporter's
    `/module/path/Op` node name (`/detector/head/conv/conv.0/Conv`: a container's child is named with its
    parent's name in front); "" at the top level. The scopes are either one name per level (`blocks`, `0`,
    `attn`) or each level's full path (`model`, `model.bert`, `model.bert.encoder`: transformers models)."""
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            try:
                modules = [s for s in ast.literal_eval(prop.value) if s][:-1]
            except (ValueError, SyntaxError):
                break
            if modules and all(inner.startswith(outer + ".") for outer, inner in itertools.pairwise(modules)):
                return modules[-1]
            return ".".join(modules)
    path: list[str] = []
    for level in [p for p in node.name.split("/") if p][:-1]:
        if path and level.startswith(path[-1] + "."):
            path[-1] = level
        else:
            path.append(level)
    return ".".join(path)


def nodes_of(proto: onnx.ModelProto, modules: Iterable[str]) -> list[str]:
    """Names of the nodes that belong to any of `modules` (or to their submodules)."""
    prefixes = tuple(m + "." for m in modules)
    return [n.name for n in proto.graph.node if prefixes and (node_module(n) + ".").startswith(prefixes)]


def nodes_outside(proto: onnx.ModelProto, modules: Iterable[str]) -> list[str]:
    """Names of the nodes that belong to none of `modules` ("" is the whole model: none)."""
    modules = list(modules)
    if "" in modules:
        return []
    inside = set(nodes_of(proto, modules))
    return [n.name for n in proto.graph.node if n.name not in inside]


def tensor_types(proto: onnx.ModelProto) -> dict[str, int]:
    """Every tensor the graph computes, with its element type (from shape inference, run on the graph with its
    weights declared as typed inputs instead: only small constants, such as Reshape's shapes, keep their data)."""
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(proto)
    declared = {i.name for i in skeleton.graph.input}
    weights = [i for i in skeleton.graph.initializer if i.ByteSize() > SMALL_CONSTANT and i.name not in declared]
    skeleton.graph.input.extend(helper.make_tensor_value_info(w.name, w.data_type, w.dims) for w in weights)
    small = [i for i in skeleton.graph.initializer if i.ByteSize() <= SMALL_CONSTANT]
    del skeleton.graph.initializer[:]
    skeleton.graph.initializer.extend(small)
    graph = onnx.shape_inference.infer_shapes(skeleton).graph
    return {v.name: v.type.tensor_type.elem_type for v in (*graph.value_info, *graph.output, *graph.input)}


def float_tensors(proto: onnx.ModelProto) -> list[str]:
    """Every float32 tensor a node writes, in graph order."""
    types = tensor_types(proto)
    return [o for n in proto.graph.node for o in n.output if types.get(o) == onnx.TensorProto.FLOAT]
