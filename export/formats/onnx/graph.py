"""ONNX export from the eager module (never a ScriptModule): dynamo exporter by default, legacy on request.

The written model is one self-contained file (weights inline) unless the weights pass protobuf's 2 GB limit, is
capped at the opset and IR version the target Triton's ONNX Runtime loads, passes
`onnx.checker.check_model(full_check=True)` (which includes strict shape inference), and records where it came
from in `metadata_props`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import torch
from google.protobuf.message import EncodeError
from torch import nn

from modelship.contract.artifact_details import OnnxDetails
from modelship.contract.errors import ExportError
from modelship.contract.iospec import IOSpec
from modelship.contract.manifest import sha256_file
from modelship.contract.opsets import OnnxExporter, RuntimeTarget
from modelship.export.formats.torchscript.jit import jit_deprecation_silenced

DEFAULT_EXPORTER = OnnxExporter.DYNAMO  # unless the task's models need another (modelship.tasks: Task.onnx_exporter)
LEGACY_MAX_OPSET = 20  # the TorchScript-based exporter writes opsets up to 20
PROTOBUF_LIMIT = 2**31 - 1
EXTERNAL_FROM = int(PROTOBUF_LIMIT * 0.9)  # weights from this size go to a .data file: the graph needs room too
METADATA_PREFIX = "modelship."
OUTPUT_PLACEHOLDER = "modelship_output_"  # the exporter's output names; `name_outputs` gives the real ones


def export_onnx(
    model: nn.Module,
    path: Path,
    io: IOSpec,
    example_inputs: tuple[torch.Tensor, ...],
    *,
    opset: int,
    target: RuntimeTarget,
    exporter: OnnxExporter = OnnxExporter.DYNAMO,
    metadata: Mapping[str, str] | None = None,
) -> Exported:
    """Export `model` to `path` (checked, capped to the target, metadata set); details: exporter, opset,
    ir_version, nodes, external_data."""
    external = _parameter_bytes(model) >= EXTERNAL_FROM
    input_names = [t.name for t in io.inputs]
    placeholders = [f"{OUTPUT_PLACEHOLDER}{i}" for i in range(len(io.outputs))]  # named after the export
    kwargs: dict[str, Any] = {
        "input_names": input_names,
        "output_names": placeholders,
        "opset_version": opset,
        "external_data": external,
    }
    dynamo = OnnxExporter(exporter) is OnnxExporter.DYNAMO
    if dynamo:
        kwargs |= {"dynamo": True, "dynamic_shapes": dynamic_shapes(io), "verbose": False, "optimize": True}
    else:
        kwargs |= {"dynamo": False, "dynamic_axes": dynamic_axes(io, placeholders)}
    try:
        with _exporters_noise_silenced():
            proto = _run_exporter(model, example_inputs, path, kwargs, dynamo=dynamo)
    except Exception as exc:
        raise _export_error(exc, exporter) from exc
    name_outputs(proto, dict(zip(placeholders, (t.name for t in io.outputs), strict=True)))
    versions = cap_versions(proto, target)
    declare_fixed_sizes(proto, io)
    set_metadata(proto, metadata or {})
    written = write_model(proto, path, external=external)
    details = OnnxDetails(
        exporter=exporter,
        opset=versions.opset,
        ir_version=versions.ir_version,
        exported_ir_version=versions.exported_ir_version,
        nodes=len(proto.graph.node),
        external_data=external,
    )
    return Exported(proto, written, details)


@contextlib.contextmanager
def _exporters_noise_silenced() -> Iterator[None]:
    """The exporters' explained noise silenced, nothing else. Legacy: its deprecation notice (the user chose
    --exporter legacy) and a deprecated helper torch calls internally. Dynamo: inputs sharing an axis share one
    Dim, and torch says it skips renaming the duplicates (the axis keeps its name). torchvision's detectors build
    size tensors from tensors as they are traced (the same values); the detector wrapper's own torch.tensor calls
    are fixed sizes and clip bounds; transformers' checks and mask helpers branch on sizes as traced (a DETR's): the
    artifact is verified at other batch and image sizes, where a trace that did not generalise would show."""
    with jit_deprecation_silenced(), warnings.catch_warnings():  # torchvision scripts box helpers when traced
        warnings.filterwarnings("ignore", "You are using the legacy TorchScript-based ONNX", DeprecationWarning)
        warnings.filterwarnings("ignore", "The feature will be removed", DeprecationWarning)
        warnings.filterwarnings("ignore", r"# The axis name: \w+ will not be used", UserWarning)
        warnings.filterwarnings("ignore", "To copy construct from a tensor", UserWarning)
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=r"modelship\.checkpoint\.")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=r"transformers\.")
        warnings.filterwarnings("ignore", "Exporting aten::index operator of advanced indexing", UserWarning)
        yield


def _export_error(exc: Exception, exporter: OnnxExporter) -> Exception:
    """What the user sees of an exporter's failure: the filesystem's own error (another exporter would not help),
    else one line naming the exporter and the other one to try."""
    system = _system_cause(exc)
    if system is not None:
        return system
    return ExportError(
        f"ONNX export ({exporter}) failed: {type(exc).__name__}: {first_cause(str(exc))}",
        hint="try --exporter legacy" if exporter is OnnxExporter.DYNAMO else "try --exporter dynamo",
        details={"step": "onnx_export", "exporter": exporter},
    )


@dataclass(frozen=True)
class Exported:
    """An exported, checked and written ONNX model: the proto (kept for the fp16 conversion), the file's sha256 and
    the details recorded in the manifest."""

    proto: onnx.ModelProto
    sha256: str
    details: OnnxDetails


def _run_exporter(
    model: nn.Module, example_inputs: tuple[torch.Tensor, ...], path: Path, kwargs: dict[str, Any], *, dynamo: bool
) -> onnx.ModelProto:
    """The exported model in memory (written to `path` first only when its weights need external data)."""
    if kwargs["external_data"]:
        torch.onnx.export(model, example_inputs, str(path), **kwargs)
        return onnx.load(str(path))
    if dynamo:
        program = torch.onnx.export(model, example_inputs, **kwargs)
        assert program is not None  # the dynamo exporter returns its ONNXProgram
        return program.model_proto
    buffer = io.BytesIO()
    torch.onnx.export(model, example_inputs, buffer, **kwargs)  # type: ignore[arg-type]  # a file object works
    return onnx.load_model_from_string(buffer.getvalue())


def name_outputs(proto: onnx.ModelProto, names: Mapping[str, str]) -> None:
    """Rename the graph's outputs from the exporter's placeholder names to `names`' values. A value inside the graph
    that already has one of those names (the dynamo exporter names values after their ops: a sentence embedding's
    `embedding` lookup) is renamed aside first, so no name is produced twice."""
    wanted = set(names.values())
    taken = {v for node in _all_nodes(proto.graph) for v in node.output if v in wanted}
    renames = {v: f"{v}__inner" for v in taken} | dict(names)
    for node in _all_nodes(proto.graph):
        node.input[:] = [renames.get(v, v) for v in node.input]
        node.output[:] = [renames.get(v, v) for v in node.output]
    for value in (*proto.graph.output, *proto.graph.value_info):
        value.name = renames.get(value.name, value.name)


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and of the subgraphs inside it (Loop and If bodies refer to outer values by name)."""
    for node in graph.node:
        yield node
        for subgraph in subgraphs(node):
            yield from _all_nodes(subgraph)


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs inside `node`'s attributes (an If's branches, a Loop's body)."""
    return [g for a in node.attribute for g in (*([a.g] if a.HasField("g") else []), *a.graphs)]


def declare_fixed_sizes(proto: onnx.ModelProto, io: IOSpec) -> None:
    """Write the sizes the model always gives into the graph's inputs and outputs where the exporter left a symbol
    (the legacy exporter loses some through reshapes and loops): Triton checks a config's output dims exactly
    against the graph's, and the sizes are the eager model's, verified on every set."""
    declared = {value.name: value.type.tensor_type.shape.dim for value in (*proto.graph.input, *proto.graph.output)}
    for tensor in (*io.inputs, *io.outputs):
        dims = declared.get(tensor.name)
        if dims is None or len(dims) != len(tensor.shape):
            continue
        for dim, size in zip(dims, tensor.shape, strict=True):
            if isinstance(size, int) and not dim.HasField("dim_value"):
                dim.dim_value = size


def first_cause(text: str) -> str:
    """The line that says what went wrong: the dynamo exporter's "Exception summary" entry, else the first line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if "## Exception summary" in lines:
        summary = lines[lines.index("## Exception summary") + 1 :]
        if summary:
            return re.sub(r"\x1b\[[0-9;]*m", "", summary[0])[:400]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[0]) if lines else ""


def _system_cause(exc: BaseException) -> OSError | None:
    """The OSError (disk full, read-only, permissions) behind an exporter failure, if one is in its chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError) and current.errno is not None:
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def dynamic_shapes(io: IOSpec) -> tuple[dict[int, torch.export.Dim], ...]:
    """torch.export `dynamic_shapes` in forward-argument order (input names given with --input need not be the
    argument names): one shared `Dim` per axis name."""
    dims: dict[str, torch.export.Dim] = {}
    return tuple(
        {index: dims.setdefault(name, torch.export.Dim(name, min=1)) for index, name in tensor.dynamic_axes.items()}
        for tensor in io.inputs
    )


def dynamic_axes(io: IOSpec, output_names: list[str]) -> dict[str, dict[int, str]]:
    """The legacy exporter's `dynamic_axes` for every input and output (the outputs as `output_names` call them)."""
    axes = {t.name: t.dynamic_axes for t in io.inputs if t.dynamic_axes}
    return axes | {name: t.dynamic_axes for name, t in zip(output_names, io.outputs, strict=True) if t.dynamic_axes}


@dataclass(frozen=True)
class Versions:
    """The opset a graph uses, the IR version written, and the one its exporter stamped."""

    opset: int
    ir_version: int
    exported_ir_version: int


def cap_versions(proto: onnx.ModelProto, target: RuntimeTarget) -> Versions:
    """Lower `ir_version` to what the target loads (the exporter stamps its own newest); refuse an opset above it."""
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset > target.max_opset:
        raise ExportError(
            f"the exported model uses opset {opset}, above {target.max_opset} (ONNX Runtime {target.onnxruntime} "
            f"in Triton {target.triton})",
            hint=f"pass --opset {target.max_opset}",
        )
    original_ir = proto.ir_version
    proto.ir_version = min(proto.ir_version, target.max_ir_version)
    return Versions(opset, proto.ir_version, original_ir)


def set_metadata(proto: onnx.ModelProto, metadata: Mapping[str, str]) -> None:
    """Write `modelship.<key>` metadata_props (replacing earlier values of the same keys)."""
    keys = {METADATA_PREFIX + k for k in metadata}
    kept = [(p.key, p.value) for p in proto.metadata_props if p.key not in keys]
    del proto.metadata_props[:]
    for key, value in [*kept, *((METADATA_PREFIX + k, v) for k, v in metadata.items())]:
        proto.metadata_props.add(key=key, value=value)


def provenance_metadata(**fields: Any) -> dict[str, str]:
    """metadata_props values: strings as they are, everything else (dicts, lists) as compact JSON; None dropped."""
    return {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True) for k, v in fields.items() if v is not None}


def write_model(proto: onnx.ModelProto, path: Path, *, external: bool = False) -> str:
    """Check `proto` with `onnx.checker.check_model(full_check=True)` and write it as one file, or as `path` +
    `path.data` when `external` (weights past the protobuf limit); the written file's sha256. One file is serialized
    once: the same bytes are checked, hashed and written."""
    if external:
        Path(f"{path}.data").unlink(missing_ok=True)  # onnx appends to an existing data file
        onnx.save_model(proto, str(path), save_as_external_data=True, location=f"{Path(path).name}.data")
        check_model(path, Path(path).name)
        return sha256_file(path)
    try:
        data = proto.SerializeToString()
    except (ValueError, EncodeError):  # past the protobuf limit after all (constants the exporter added)
        return write_model(proto, path, external=True)
    check_model(data, Path(path).name)
    Path(path).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def check_model(model: Path | bytes, name: str) -> None:
    """`onnx.checker.check_model(full_check=True)`, or an ExportError naming `name` with the checker's message."""
    try:
        onnx.checker.check_model(model if isinstance(model, bytes) else str(model), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise ExportError(
            f"{name} fails the ONNX checker: {str(exc).strip().splitlines()[0]}", details={"step": "onnx_check"}
        ) from exc


def _parameter_bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
