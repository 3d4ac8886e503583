"""What every format's exporter shares while an export is built (`Build`), the eager reference they are all judged
against (`Verification`), what a format's exporter hands its variants (`Written`) and what every artifact step
returns (`BuiltArtifact`, or `Declined` for a variant not written)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from modelship.contract.artifact_details import ArtifactDetails
from modelship.contract.artifacts import EXPORT_FILES
from modelship.contract.iospec import BATCH, IOSpec, TensorSpec
from modelship.contract.manifest import Declined
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.contract.tokenizer import TokenizerSource
from modelship.export.io_resolve import ResolvedInputs, base_sizes
from modelship.export.plan import ExportPlan
from modelship.export.spec import ExportSpec
from modelship.export.steps import Steps
from modelship.export.text_inputs import TextSets, check_padding, text_input_sets
from modelship.parity import (
    ParityReport,
    Runner,
    RunResults,
    ToleranceConfig,
    input_sets,
    judge_runner,
    random_inputs,
    reference_results,
    reference_runner,
)
from modelship.tasks import Task


@dataclass
class Verification:
    """Seeded input sets, their labels, the eager results on them (computed once, judged against every artifact)
    and the compare kind of each output (from the task)."""

    inputs: list[Tensors]
    labels: list[str]
    eager: RunResults
    kinds: dict[str, str]
    texts: tuple[int, ...] = ()  # the sets of real sentences (a text model's), by index

    @property
    def random_sets(self) -> list[Tensors]:
        """The seeded random input sets (not the real sentences)."""
        return [s for i, s in enumerate(self.inputs) if i not in self.texts]

    @property
    def outputs(self) -> list[Tensors]:
        return self.eager.outputs

    def judge(self, runner: Runner, tolerance: ToleranceConfig) -> ParityReport:
        """`runner` on every input set, judged against the eager results."""
        return judge_runner(self.eager, runner, self.inputs, self.labels, tolerance, self.kinds)


def reference_outputs(plan: ExportPlan) -> Verification:
    """The export's verification: its seeded sets (and a text model's sentences) and eager's outputs on them."""
    texts = text_input_sets(plan.tokenizer, plan.spec.batch_sizes) if plan.tokenizer is not None else None
    return make_verification(plan.model, plan.io, plan.resolved, plan.spec, plan.task.output_kinds(plan.io), texts)


def make_verification(
    model: nn.Module,
    io: IOSpec,
    resolved: ResolvedInputs,
    spec: ExportSpec,
    kinds: dict[str, str],
    texts: TextSets | None = None,
) -> Verification:
    """Input sets at every batch size, plus one per other dynamic axis at its second size, plus a text model's
    tokenised sentences (`texts`, whose padding the eager answers must not depend on); eager outputs."""
    sets = input_sets(io, spec.batch_sizes, seed=spec.seed, sizes=resolved.sizes)
    labels = [f"batch {b}" for b in spec.batch_sizes]
    base = {axis: size for axis, size in base_sizes(resolved).items() if axis != BATCH}
    for i, axis in enumerate(a for a in resolved.dynamic_axes if a != BATCH):
        sizes = base | {axis: resolved.second_size(axis), BATCH: spec.batch_sizes[-1]}
        sets.append(random_inputs(io, sizes, spec.seed + len(spec.batch_sizes) + i))
        labels.append(f"batch {spec.batch_sizes[-1]}, {axis} {sizes[axis]}")
    first_text = len(sets)
    if texts is not None:
        sets += texts.inputs
        labels += texts.labels
    eager = reference_results(reference_runner(model, io, name="eager"), sets)
    if texts is not None:
        check_padding(eager.outputs[first_text:], texts)
    return Verification(sets, labels, eager, kinds, tuple(range(first_text, len(sets))))


@dataclass(frozen=True)
class BuiltArtifact:
    """One artifact a format's exporter wrote and verified (its file is `Build.path(name)`)."""

    name: str
    format: str
    precision: str
    io: IOSpec
    report: ParityReport
    details: ArtifactDetails
    sha256: str | None = None  # when the step hashed the file as it wrote it
    files: tuple[str, ...] = ()  # files it wrote besides the artifact (an INT8 variant's golden data)
    judged: Verification | None = None  # the sets it was judged on, when not the export's (INT8: held-back inputs)


Finish = Callable[[], "BuiltArtifact | Declined"]


@dataclass(frozen=True)
class Written:
    """An fp32 artifact as its format's exporter wrote it (its verification may still be running): what the
    format's variants are built from. `graph`: the ONNX ModelProto, for formats that hold one."""

    name: str
    format: str
    io: IOSpec
    details: ArtifactDetails
    graph: Any = None


@dataclass(frozen=True)
class Started:
    """One fp32 artifact a format's exporter started: what it wrote, and what waits for its verdict."""

    written: Written
    finish: Finish


@dataclass(frozen=True)
class Workspace:
    """Where an export's artifacts are written and timed: the staging folder (moved into place at the end), the
    step timer, and a thread for verifications that overlap the next export (TorchScript's)."""

    staging: Path
    steps: Steps
    background: ThreadPoolExecutor

    def path(self, name: str) -> Path:
        """The file of artifact `name` in the staging folder."""
        return self.staging / EXPORT_FILES[name]

    def file(self, name: str) -> Path:
        """A file beside the artifacts in the staging folder."""
        return self.staging / name


@dataclass(frozen=True)
class Build:
    """What every artifact step reads, frozen: the plan (export.plan: model, spec, I/O, task, example, ONNX
    target), the eager reference every artifact is judged against, and the workspace it writes into. A step returns
    what it made (`Started`, `BuiltArtifact`, `Declined`) and changes none of it."""

    plan: ExportPlan
    verification: Verification
    workspace: Workspace

    @property
    def model(self) -> nn.Module:
        return self.plan.model

    @property
    def spec(self) -> ExportSpec:
        return self.plan.spec

    @property
    def io(self) -> IOSpec:
        return self.plan.io

    @property
    def example(self) -> tuple[torch.Tensor, ...]:
        return self.plan.example

    @property
    def task(self) -> Task:
        return self.plan.task

    @property
    def preprocess(self) -> PreprocessSpec | None:
        return self.plan.preprocess

    @property
    def tokenizer(self) -> TokenizerSource | None:
        return self.plan.tokenizer

    @property
    def steps(self) -> Steps:
        return self.workspace.steps

    @property
    def background(self) -> ThreadPoolExecutor:
        return self.workspace.background

    def path(self, name: str) -> Path:
        return self.workspace.path(name)

    def file(self, name: str) -> Path:
        return self.workspace.file(name)

    def verify(self, name: str, runner: Runner, precision: str) -> ParityReport:
        """`runner` against the eager reference, timed as the step "verify <name>"."""
        with self.steps(f"verify {name}", name):
            return self.verify_with(runner, precision)

    def verify_with(self, runner: Runner, precision: str) -> ParityReport:
        return self.verification.judge(runner, self.spec.tolerance(precision))


def float_io(io: IOSpec, dtype: str, *, inputs: bool, outputs: bool) -> IOSpec:
    """The same I/O with float inputs and/or outputs switched to `dtype` (an fp16 artifact's own I/O)."""

    def switch(specs: Sequence[TensorSpec], on: bool) -> tuple[TensorSpec, ...]:
        return tuple(t.with_dtype(dtype) if on and t.dtype.startswith("float") else t for t in specs)

    return IOSpec(switch(io.inputs, inputs), switch(io.outputs, outputs))
