"""fp16 variants: ONNX graphs converted to float16, and half-precision copies of eager modules for TorchScript.

ONNX conversion uses `onnxruntime.transformers.float16` followed by a topological sort: onnxconverter-common's
converter writes graphs ONNX Runtime refuses to load for Swin and legacy-exported ViTs, and the raw output of
ONNX Runtime's converter is not topologically sorted (docs/export.md). It also writes the Casts around a blocked
node inside an If/Loop body (a detector's NonMaxSuppression) into the main graph; they are moved into the body, and
the sort counts what a body reads from outside. Precision-sensitive ops are converted too at
first; if parity fails, the pipeline retries with the widening block lists of FP16_ATTEMPTS, keeping those ops in
fp32, and records which were kept and why.
"""

from __future__ import annotations

import copy
import inspect
import linecache
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import onnx
import torch
from torch import nn

from modelship.checkpoint.families.model_hooks import fp16_parts
from modelship.contract.artifact_details import KeptModule
from modelship.contract.errors import ExportError
from modelship.contract.iospec import IOSpec
from modelship.export.formats.onnx.graph import subgraphs
from modelship.export.precision.fp16.ranges import unsupported_ops
from modelship.parity.onnx_graph import nodes_of, nodes_outside, tensor_types

# (why, op types kept in fp32), tried in order, each list including the previous ones.
_NORMALISATION = ("LayerNormalization", "Softmax", "ReduceMean", "GroupNormalization", "InstanceNormalization")
_RANGE = ("Pow", "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "ReduceSum", "ReduceL2", "Div")
FP16_ATTEMPTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("all ops in fp16", ()),
    ("normalisation and softmax accumulate in fp32", _NORMALISATION),
    ("exponentials, powers and divisions overflow or underflow fp16", (*_NORMALISATION, *_RANGE)),
)


def convert_onnx_fp16(
    proto: onnx.ModelProto,
    *,
    keep_io_types: bool = True,
    op_block_list: Sequence[str] = (),
    node_block_list: Sequence[str] = (),
) -> onnx.ModelProto:
    """A float16 copy of `proto` (float32 I/O kept when `keep_io_types`); `op_block_list` ops and the nodes named
    in `node_block_list` stay float32, on top of ONNX Runtime's default block list (ops without fp16 kernels)."""
    from onnxruntime.transformers import float16

    blocked = sorted({*unsupported_ops(), *op_block_list})
    source = copy.deepcopy(proto)
    del source.graph.value_info[:]  # stale intermediate types make the converter write mismatching casts
    try:
        converted = float16.convert_float_to_float16(
            source,
            keep_io_types=keep_io_types,
            op_block_list=blocked,
            node_block_list=list(node_block_list) or None,
        )
        kept = set(node_block_list)
        _drop_round_trips(converted, lambda node: node.op_type in blocked or node.name in kept)
        _drop_repeated_nodes(converted)
        _home_stray_nodes(converted.graph)
        _sort_graph(converted.graph)
    except Exception as exc:  # the converter asserts and raises ValueError/KeyError on graphs it cannot handle
        raise ExportError(
            f"fp16 conversion failed: {type(exc).__name__}: {exc}",
            hint="export without --fp16, or report the model",
            details={"step": "fp16_convert"},
        ) from exc
    return converted


def _drop_repeated_nodes(proto: onnx.ModelProto) -> None:
    """Keep one of identical nodes writing the same tensor: the converter writes one Cast per blocked consumer of a
    float16 tensor, all named alike (two kept convolutions reading one max-pool output break SSA otherwise)."""
    seen: dict[tuple, bytes] = {}
    kept = []
    for node in proto.graph.node:
        key = tuple(node.output)
        signature = node.SerializeToString(deterministic=True)
        if key in seen and seen[key] == signature:
            continue
        seen.setdefault(key, signature)
        kept.append(node)
    del proto.graph.node[:]
    proto.graph.node.extend(kept)


def _home_stray_nodes(graph: onnx.GraphProto) -> None:
    """Move each node that reads a value only an If/Loop body produces into that body: ONNX Runtime's converter
    writes the Casts around a blocked node of a subgraph (a detector's NonMaxSuppression) into the main graph, which
    then reads values it cannot see ("Graph is not a DAG")."""
    available = {v.name for v in (*graph.input, *graph.initializer)} | {o for n in graph.node for o in n.output}
    for node in list(graph.node):
        stray = next((name for name in node.input if name and name not in available), None)
        home = _producing_subgraph(graph, stray) if stray else None
        if home is not None:
            graph.node.remove(node)
            home.node.append(node)


def _producing_subgraph(graph: onnx.GraphProto, name: str) -> onnx.GraphProto | None:
    """The subgraph of `graph` (at any depth) one of whose nodes writes `name`."""
    for node in graph.node:
        for subgraph in subgraphs(node):
            if any(name in inner.output for inner in subgraph.node):
                return subgraph
            found = _producing_subgraph(subgraph, name)
            if found is not None:
                return found
    return None


def _reads(node: onnx.NodeProto) -> set[str]:
    """The values `node` reads: its inputs and what its If/Loop bodies read from outside themselves."""
    names = set(node.input)
    for subgraph in subgraphs(node):
        inner = {v.name for v in (*subgraph.input, *subgraph.initializer)}
        inner |= {o for n in subgraph.node for o in n.output}
        names |= {name for n in subgraph.node for name in _reads(n) if name not in inner}
        names |= {o.name for o in subgraph.output if o.name not in inner}
    return names


def _sort_graph(graph: onnx.GraphProto) -> None:
    """Topologically sort `graph` and every body inside it: a node comes after the producers of everything it reads,
    its bodies' reads from outside included (ONNX Runtime's own sort misses those and puts an If before them)."""
    for node in graph.node:
        for subgraph in subgraphs(node):
            _sort_graph(subgraph)
    _sort_nodes(graph)


def _sort_nodes(graph: onnx.GraphProto) -> None:
    """Order `graph`'s nodes so that each comes after the nodes of the same graph whose outputs it reads (values
    from outside, the body's inputs and initializers need no producer here); an order that is already right stays."""
    producer = {output: index for index, node in enumerate(graph.node) for output in node.output}
    reads = [_reads(node) for node in graph.node]
    order: list[int] = []
    placed: set[int] = set()
    entered: set[int] = set()  # a node seen again before it is placed is on a cycle: left where the walk put it
    for start in range(len(graph.node)):
        stack = [(start, False)]
        while stack:
            index, ready = stack.pop()
            if index in placed or (index in entered and not ready):
                continue
            if ready:
                placed.add(index)
                order.append(index)
                continue
            entered.add(index)
            stack.append((index, True))
            stack += [(producer[name], False) for name in sorted(reads[index]) if producer.get(name, index) != index]
    nodes = [graph.node[i] for i in order]
    del graph.node[:]
    graph.node.extend(nodes)


def _drop_round_trips(proto: onnx.ModelProto, kept_fp32: Callable[[onnx.NodeProto], bool]) -> None:
    """Remove the float32 -> float16 -> float32 Cast pairs the converter writes between two nodes kept in fp32:
    the value would pass through float16 (and overflow) exactly where it was kept out of it. An If/Loop kept in
    fp32 (its bodies stay float32) that reads the value from inside a body reads the float32 value too: the
    converter renames the value it casts without renaming those reads."""
    graph = proto.graph
    outputs = {o.name for o in graph.output}
    types = tensor_types(proto)
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in _reads(node):
            consumers.setdefault(name, []).append(node)

    def cast_to(node: onnx.NodeProto) -> int | None:
        return next((a.i for a in node.attribute if a.name == "to"), None) if node.op_type == "Cast" else None

    removed: set[int] = set()
    for node in graph.node:
        if cast_to(node) != onnx.TensorProto.FLOAT16 or node.output[0] in outputs:
            continue
        half, full = node.output[0], node.input[0]
        back = consumers.get(half, [])
        direct = [b for b in back if half in b.input]
        inside = [b for b in back if half not in b.input]
        if not back or any(cast_to(b) != onnx.TensorProto.FLOAT for b in direct):
            continue
        if types.get(full) != onnx.TensorProto.FLOAT or not all(map(kept_fp32, inside)):
            continue
        for cast in direct:  # now a float32 -> float32 Cast: a no-op ONNX Runtime removes
            cast.input[0] = full
        for holder in inside:
            for body in subgraphs(holder):
                _rename_reads(body, half, full)
        removed.add(id(node))
    kept = [n for n in graph.node if id(n) not in removed]
    del graph.node[:]
    graph.node.extend(kept)


def fp32_nodes(
    proto: onnx.ModelProto, model: nn.Module, keep_modules: Sequence[str], out_of_range: Sequence[str] = ()
) -> list[str]:
    """The nodes of `model`'s fp32 graph `proto` that its fp16 ONNX variant computes in fp32: the `out_of_range`
    ones, those of the `keep_modules`, and every node outside the parts that compute in float16 (`fp16_parts`: a
    detector's resize, box decoding and NMS stay float32, as in its TorchScript fp16 variant)."""
    return [*out_of_range, *nodes_of(proto, keep_modules), *nodes_outside(proto, fp16_parts(model))]


def _rename_reads(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Make every node of `graph`, its bodies' included, read `new` where it read `old`."""
    for node in graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        for body in subgraphs(node):
            _rename_reads(body, old, new)


def present_ops(proto: onnx.ModelProto, op_types: Sequence[str]) -> list[str]:
    """The op types of `op_types` that occur in the graph (what a block list actually kept in fp32)."""
    used = {node.op_type for node in proto.graph.node}
    return sorted(used & set(op_types))


def half_module(model: nn.Module, keep: Sequence[str] = ()) -> nn.Module:
    """A float16 copy of an eager module (the original stays float32: it is the parity reference); the submodules
    named in `keep` stay float32, wrapped so they take and return float16 like their neighbours.

    A detector computes in float16 only in its backbone (`fp16_parts`), behind casts: box decoding and NMS stay
    float32, as deployments keep them (torchvision's CPU NMS has no float16 kernel)."""
    half = copy.deepcopy(model).eval()
    parts = fp16_parts(half)
    for part in parts:
        half.get_submodule(part).half()
    for name in keep:
        parent, _, leaf = name.rpartition(".")
        inner = half.get_submodule(name).float()
        setattr(half.get_submodule(parent), leaf, _float_island(inner, name))
    for part in filter(None, parts):
        parent, _, leaf = part.rpartition(".")
        setattr(half.get_submodule(parent), leaf, _Float16Features(half.get_submodule(part)))
    return half


class _Float16Features(nn.Module):
    """A float16 feature extractor between float32 neighbours: float32 image in, float32 feature maps out."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, image: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.inner(image.half())
        return {name: value.float() for name, value in features.items()}


def fp16_keep_modules(
    model: nn.Module, batches: Sequence[tuple[torch.Tensor, ...]], rounds: int = 8
) -> list[KeptModule]:
    """The submodules to keep in fp32 so the model computes right in real float16 arithmetic (torch computes half
    on the CPU for real): while the half model's outputs are not finite or differ from fp32, replay each module in
    half on the inputs the fp32 model gave it and keep the first whose own computation diverges (overflow,
    underflow, lost precision)."""
    from modelship.parity.localize import replay

    kept: list[KeptModule] = []
    for _ in range(rounds):
        half = half_module(model, [k.module for k in kept])
        bad = next((b for b in batches if _diverges(model, half, b)), None)
        if bad is None:
            break
        found = replay(half, model, bad, "fp16", "fp16").first
        if found is None or found.module in {k.module for k in kept}:
            break
        why = (
            found.note or f"its float16 output differs by {found.relative:.3g} of its range (cosine {found.cosine:.4f})"
        )
        kept.append(KeptModule(found.module, why))
    return kept


def _diverges(model: nn.Module, half: nn.Module, batch: tuple[torch.Tensor, ...]) -> bool:
    from modelship.parity.localize import divergence, first_tensor

    with torch.inference_mode():
        reference = first_tensor(model(*batch))
        candidate = first_tensor(half(*(t.half() if t.is_floating_point() else t for t in batch)))
    return divergence("output", reference.float().numpy(), candidate.float().numpy(), "fp16") is not None


def _float_island(inner: nn.Module, name: str) -> nn.Module:
    """`inner` (float32) behind casts: float16 tensors in, float32 inside, float16 out. Scriptable."""
    params = [
        p.name
        for p in inspect.signature(inner.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if not params:
        raise ExportError(f"cannot keep module {name!r} in fp32: its forward takes no tensor arguments")
    args = ", ".join(f"{p}: torch.Tensor" for p in params)
    calls = ", ".join(f"{p}.float()" for p in params)
    source = (
        "class Float32Island(torch.nn.Module):\n"
        "    def __init__(self, inner: torch.nn.Module) -> None:\n"
        "        super().__init__()\n"
        "        self.inner = inner\n\n"
        f"    def forward(self, {args}) -> torch.Tensor:\n"
        f"        return self.inner({calls}).half()\n"
    )
    return _define(source, "Float32Island")(inner)


def half_with_float_io(
    model: nn.Module, io: IOSpec, example: tuple[torch.Tensor, ...], keep: Sequence[str] = ()
) -> nn.Module:
    """A float16 copy of `model` that takes and returns float32 like the fp32 model, casting inside forward (so
    clients and Triton's classification extension see FP32, as with fp16 ONNX). Scriptable: the wrapper's source
    is generated for this model's inputs and output structure, and it returns the outputs as one tensor or a flat
    tuple in `flatten_outputs` order (what Triton's LibTorch backend maps to OUTPUT__0, OUTPUT__1, ...)."""
    with torch.inference_mode():  # the output structure, from the fp32 model: half is slow on the CPU
        result = model(*example)
    inner = half_module(model, keep)
    paths = _tensor_paths(result, "out")
    if len(paths) != len(io.outputs):
        raise ExportError(f"the model returned {len(paths)} tensors, the I/O spec names {len(io.outputs)}")
    parts = [_cast(path, spec.dtype.startswith("float")) for path, spec in zip(paths, io.outputs, strict=True)]
    if isinstance(result, torch.Tensor):
        returns, body = "torch.Tensor", parts[0]
    else:
        returns, body = f"tuple[{', '.join(['torch.Tensor'] * len(parts))}]", f"({', '.join(parts)},)"
    params = [spec.name if spec.name.isidentifier() else f"input_{i}" for i, spec in enumerate(io.inputs)]
    args = ", ".join(f"{param}: torch.Tensor" for param in params)
    calls = ", ".join(
        _cast(param, spec.dtype.startswith("float"), "half") for param, spec in zip(params, io.inputs, strict=True)
    )
    source = (
        "class FloatIOHalf(torch.nn.Module):\n"
        "    def __init__(self, inner: torch.nn.Module) -> None:\n"
        "        super().__init__()\n"
        "        self.inner = inner\n\n"
        f"    def forward(self, {args}) -> {returns}:\n"
        f"        out = self.inner({calls})\n"
        f"        return {body}\n"
    )
    return _define(source, "FloatIOHalf")(inner).eval()


def _tensor_paths(value: Any, expression: str) -> list[str]:
    """TorchScript expressions reaching every tensor of a returned structure, in `flatten_outputs` order."""
    if isinstance(value, torch.Tensor):
        return [expression]
    if isinstance(value, Mapping):
        items = [(f"{expression}[{key!r}]", item) for key, item in value.items()]
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        items = [(f"{expression}.{name}", item) for name, item in zip(value._fields, value, strict=True)]
    elif isinstance(value, (tuple, list)):
        items = [(f"{expression}[{i}]", item) for i, item in enumerate(value)]
    else:
        raise ExportError(
            f"fp16 TorchScript with float32 I/O cannot wrap a model returning {type(value).__name__}",
            hint="pass --fp16-io to export fp16 variants that take and return float16",
        )
    return [path for sub, item in items for path in _tensor_paths(item, sub)]


def _cast(expression: str, floating: bool, to: str = "float") -> str:
    return f"{expression}.{to}()" if floating else expression


def _define(source: str, name: str) -> type:
    """Execute generated class source so that `torch.jit.script` can read it back (inspect goes via linecache)."""
    filename = f"<modelship-generated-{abs(hash(source)):x}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict = {"torch": torch, "__name__": "modelship_generated"}
    exec(compile(source, filename, "exec"), namespace)  # our own generated source, never user input
    return namespace[name]
