"""What an export is, decided before anything is written: `plan_export` resolves the model's inputs and outputs and
its task, lets each variant refuse what it cannot build, settles the ONNX exporter and opset, and builds the seeded
example input and the provenance every artifact records. The result (`ExportPlan`) is frozen: every later step
reads it, none changes it."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from modelship import __version__
from modelship.checkpoint.families.model_hooks import score_threshold
from modelship.checkpoint.metadata import CheckpointMetadata
from modelship.contract.iospec import IOSpec
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import Source
from modelship.contract.opsets import OnnxExporter, RuntimeTarget, resolve_opset, runtime_target
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tokenizer import TokenizerSource
from modelship.export.formats.onnx.graph import DEFAULT_EXPORTER, LEGACY_MAX_OPSET, provenance_metadata
from modelship.export.io_resolve import (
    InputSource,
    ResolvedInputs,
    base_sizes,
    discover_outputs,
    resolve_inputs,
    torch_inputs,
)
from modelship.export.precision.registry import variants_of
from modelship.export.preprocess_fit import check_preprocess_fits
from modelship.export.spec import ExportSpec
from modelship.export.steps import Steps
from modelship.tasks import Task, choose_task


@dataclass(frozen=True)
class ExportInputs:
    """What an export is given besides the model and its spec: where the model came from (`source`), the
    checkpoint's metadata (its io, labels, task), the model's preprocessing when known, the sidecar written beside
    the artifacts, and a text model's tokenizer (it feeds the verification real sentences and is copied in).
    `preprocess_given`: the preprocessing was given (`--preprocess`), not implied by the checkpoint or its family,
    so it must fit the model's image input (an implied one may not: a fixed `--input` smaller than the family's crop
    still exports)."""

    source: Source
    metadata: CheckpointMetadata
    preprocess: PreprocessSpec | None = None
    sidecar: JsonObject | None = None
    tokenizer: TokenizerSource | None = None
    preprocess_given: bool = False


@dataclass(frozen=True)
class ExportPlan:
    """The export, decided: the model (in eval mode), the spec with its exporter, task and score threshold settled,
    the resolved inputs and the I/O they give, the task, the seeded example, the ONNX exporter, opset and runtime
    target, the provenance every artifact records, and what it was given."""

    model: nn.Module
    spec: ExportSpec
    resolved: ResolvedInputs
    io: IOSpec
    task: Task
    example: tuple[torch.Tensor, ...]
    exporter: OnnxExporter
    opset: int
    target: RuntimeTarget
    provenance: dict[str, str]
    given: ExportInputs

    @property
    def preprocess(self) -> PreprocessSpec | None:
        return self.given.preprocess

    @property
    def tokenizer(self) -> TokenizerSource | None:
        return self.given.tokenizer


def plan_export(model: nn.Module, spec: ExportSpec, given: ExportInputs, steps: Steps) -> ExportPlan:
    """Resolve and check everything an export needs before it writes anything (see the module doc)."""
    model = model.eval()
    with steps("resolve inputs and outputs"):
        resolved, io, task = resolve_task(model, spec, given)
    if given.preprocess_given:
        check_preprocess_fits(io, given.preprocess)
    for variant in (v for f in spec.formats for v in variants_of(f, spec.precisions)):
        if variant.check is not None:
            variant.check(spec, given.preprocess, given.tokenizer)
    exporter = spec.exporter or task.onnx_exporter or DEFAULT_EXPORTER
    spec = replace(spec, exporter=exporter, score_threshold=score_threshold(model), task=task.name)
    target = runtime_target(spec.triton)
    opset = resolve_opset(spec.opset, target, LEGACY_MAX_OPSET if exporter is OnnxExporter.LEGACY else None)
    provenance = provenance_metadata(
        name=spec.name,
        checkpoint_sha256=given.source.sha256,
        arch=given.source.arch,
        version=__version__,
        io=io.to_dict(),
        preprocess=given.preprocess.to_dict() if given.preprocess is not None else None,
    )
    example = torch_inputs(io, base_sizes(resolved), spec.seed)
    return ExportPlan(model, spec, resolved, io, task, example, exporter, opset, target, provenance, given)


def resolve_task(model: nn.Module, spec: ExportSpec, given: ExportInputs) -> tuple[ResolvedInputs, IOSpec, Task]:
    """The inputs, the outputs they give and the task; a task whose models take images of any size (segmentation)
    gets its dynamic axes when the inputs come from the architecture and --dynamic said nothing."""

    def resolve(dynamic: tuple[str, ...]) -> tuple[ResolvedInputs, IOSpec]:
        resolved = resolve_inputs(
            model,
            arch=given.source.arch,
            io=given.metadata.io,
            preprocess=given.preprocess,
            input_options=spec.input_options,
            dynamic=dynamic,
        )
        return resolved, discover_outputs(model, resolved)

    resolved, io = resolve(spec.dynamic)
    task = choose_task(io, spec.task or given.metadata.task)
    if task.dynamic and not spec.dynamic and resolved.source is InputSource.ARCHITECTURE:
        resolved, io = resolve(task.dynamic)
    return resolved, io, task
