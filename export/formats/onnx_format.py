"""ONNX (`--onnx`): the model through torch.onnx (dynamo or legacy exporter) at the target Triton's opset, its dynamic
axes checked in the graph, verified in ONNX Runtime; `--fp16` adds the variant export.fp16_strategy converts.

A task whose models loop over the images of a batch in Python (detectors) gets single-row graphs: the legacy
exporter unrolls that loop, so the batch axis is fixed at 1 and the graph is verified row by row on every set."""

from __future__ import annotations

import onnx

from modelship.contract.errors import ExportError
from modelship.contract.iospec import IOSpec
from modelship.export.build import Build, BuiltArtifact, float_io
from modelship.export.formats import Finish, FormatExporter, register_format
from modelship.export.fp16_strategy import onnx_fp16
from modelship.export.onnx_export import export_onnx
from modelship.parity import OnnxRuntimeRunner


def start(build: Build) -> list[Finish]:
    """fp32, then fp16 from the same graph; each verified as it is written."""
    spec, name = build.spec, "onnx"
    io, example = build.io, build.example
    if build.task.onnx_single_row:
        io, example = io.single_row(), tuple(t[:1] for t in example)
    with build.steps("export onnx", name):
        exported = export_onnx(
            build.model,
            build.path(name),
            io,
            example,
            opset=build.opset,
            target=build.target,
            exporter=spec.exporter,
            metadata=build.provenance | {"precision": "fp32"},
        )
        check_dynamic_axes(exported.proto, io)
    build.hashes[name] = exported.sha256
    build.external_data = exported.details.external_data
    report = build.verify(name, OnnxRuntimeRunner(build.path(name), io, name=name, fp16=False), "fp32")
    built = [BuiltArtifact(name, "onnx", "fp32", io, report, exported.details)]
    if spec.fp16:
        art_io = float_io(io, "float16", inputs=spec.fp16_io, outputs=spec.fp16_io)
        report, fp16_details = onnx_fp16(build, exported, art_io)
        built.append(BuiltArtifact("onnx_fp16", "onnx", "fp16", art_io, report, fp16_details))
    return [lambda artifact=artifact: artifact for artifact in built]


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


ONNX = register_format(FormatExporter("onnx", start, order=2))
