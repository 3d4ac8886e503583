"""ONNX's exporter: the model through torch.onnx (dynamo or legacy exporter, graph.py) at the target Triton's opset,
its dynamic axes checked in the graph, verified in ONNX Runtime. Its variants (fp16: export.precision.fp16, INT8:
export.precision.int8) are built from the graph written here.

A task whose models loop over the images of a batch in Python (detectors) gets single-row graphs: the legacy
exporter unrolls that loop, so the batch axis is fixed at 1 and the graph is verified row by row on every set."""

from __future__ import annotations

import onnx

from modelship.contract.errors import ExportError
from modelship.contract.iospec import IOSpec
from modelship.contract.precisions import FP32
from modelship.export.build import Build, BuiltArtifact, Started, Written
from modelship.export.formats.onnx import FORMAT
from modelship.export.formats.onnx.graph import export_onnx
from modelship.export.formats.registry import FormatExporter, register_format
from modelship.parity import OnnxRuntimeRunner


def start(build: Build) -> list[Started]:
    """The fp32 graph, verified as it is written."""
    name = FORMAT
    io, example = build.io, build.example
    if build.task.onnx_single_row:
        io, example = io.single_row(), tuple(t[:1] for t in example)
    with build.steps("export onnx", name):
        exported = export_onnx(
            build.model,
            build.path(name),
            io,
            example,
            opset=build.plan.opset,
            target=build.plan.target,
            exporter=build.plan.exporter,
            metadata=build.plan.provenance | {"precision": "fp32"},
        )
        check_dynamic_axes(exported.proto, io)
    report = build.verify(name, OnnxRuntimeRunner(build.path(name), io, name=name, fp16=False), FP32)
    built = BuiltArtifact(name, FORMAT, FP32, io, report, exported.details, exported.sha256)
    return [Started(Written(name, FORMAT, io, exported.details, exported.proto), lambda: built)]


def check_dynamic_axes(proto: onnx.ModelProto, io: IOSpec) -> None:
    """ExportError if an axis the spec calls dynamic has a fixed size in the ONNX graph's inputs or outputs."""
    graph_dims = {value.name: value.type.tensor_type.shape.dim for value in (*proto.graph.input, *proto.graph.output)}
    baked = []
    for tensor in (*io.inputs, *io.outputs):
        dims = graph_dims.get(tensor.name)
        if dims is None:
            raise ExportError(f"the ONNX graph has no input/output named {tensor.name!r}")
        for index, axis in tensor.dynamic_axes.items():
            if index < len(dims) and dims[index].HasField("dim_value"):
                baked.append(f"{tensor.name}[{index}] ({axis}) = {dims[index].dim_value}")
    if baked:
        raise ExportError(
            f"the exporter baked dynamic axes into fixed sizes: {', '.join(baked)}",
            hint="the model's code specialises on that size; try --exporter legacy or fix the model",
            details={"baked_axes": baked},
        )


ONNX = register_format(FormatExporter(FORMAT, start, order=2))
