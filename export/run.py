"""The export run: eager model -> every format asked for (export.formats, fp32) and their variants at the precisions
asked for (export.precision: fp16, INT8) -> verified against eager -> export folder. `run_export` reads as the steps
it runs, each with typed inputs and outputs: plan (export.plan), reference outputs (export.build), the artifacts
(export.assemble), the declines and failures refused (export.precision.registry, export.failures), the export's own
files (export.export_files), the move into place.

Every artifact is compared with the eager model by the parity engine on the same seeded inputs, at every batch
size asked for and at a second size of every other dynamic axis, with the compare function the task gives each
output. Everything is built in a staging folder next to the destination (same filesystem) and moved into place only
when every artifact passed, so a failed or interrupted export never leaves a half-written folder; `force` replaces
an existing export by two renames.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from modelship.checkpoint.metadata import CheckpointMetadata
from modelship.contract.errors import ExportError, os_failure
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import Manifest, Source, StepTiming
from modelship.contract.parity_report import ParityReport
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.staging import (
    StagedChanges,
    commit,
    missing_parents,
    remove_if_empty,
    staging_folder,
    sweep,
    writable_parent,
)
from modelship.contract.tokenizer import TokenizerSource
from modelship.export.assemble import build_artifacts
from modelship.export.build import Build, Workspace, reference_outputs
from modelship.export.export_files import write_export_files
from modelship.export.failures import refuse_failures
from modelship.export.plan import ExportInputs, plan_export
from modelship.export.precision.registry import refuse_declined
from modelship.export.spec import ExportSpec
from modelship.export.steps import Steps


@dataclass
class ExportResult:
    manifest: Manifest
    folder: Path
    reports: dict[str, ParityReport]
    timings: list[StepTiming]


def run_export(
    model: nn.Module,
    spec: ExportSpec,
    *,
    source: Source,
    metadata: CheckpointMetadata | None = None,
    preprocess: PreprocessSpec | None = None,
    sidecar: JsonObject | None = None,
    steps: Steps | None = None,
    tokenizer: TokenizerSource | None = None,
    preprocess_given: bool = False,
) -> ExportResult:
    """Export, verify and write `spec.out_dir`. Raises ExportError/ParityError with nothing written on failure.

    `metadata` is the checkpoint's metadata (its io, labels, task); `preprocess` the model's preprocessing spec
    when known (`preprocess_given`: given, not implied, so checked against the model's input: ExportInputs);
    `sidecar` is written as checkpoint.json beside the artifacts; `tokenizer` (a text model's) feeds the
    verification real sentences and is copied into the export. A model the checkpoint loader returned is exported
    through export.loaded.export_loaded, which fills each of these in from the load.
    """
    given = ExportInputs(source, metadata or CheckpointMetadata(), preprocess, sidecar, tokenizer, preprocess_given)
    steps = steps or Steps()
    refuse_existing(spec.out_dir, spec.force)
    plan = plan_export(model, spec, given, steps)
    with steps("reference outputs (eager)"):
        verification = reference_outputs(plan)
    with staged(plan.spec, steps) as workspace:
        made = build_artifacts(Build(plan, verification, workspace))
        refuse_declined(made.declined, spec.require_variants)
        refuse_failures(made, verification, workspace.staging, plan.model, plan.io)
        manifest = write_export_files(plan, verification, made, workspace)
        move_into_place(workspace.staging, spec.out_dir, spec.force)
    return ExportResult(manifest, spec.out_dir, made.reports, steps.timings)


@contextlib.contextmanager
def staged(spec: ExportSpec, steps: Steps) -> Iterator[Workspace]:
    """A staging folder beside the destination (same filesystem, so the final move is a rename) and the thread
    TorchScript verifications run on while the other formats export (the eager half forward takes one core and the
    exporters mostly hold the GIL; the thread only runs reloaded ScriptModules). On the way out, whatever happened:
    verifications not started are dropped, the staging folder removed, and --out folders this export made removed
    again when nothing landed in them."""
    dest = spec.out_dir
    created = missing_parents(dest)
    sweep(writable_parent(dest, "the export"))
    staging = staging_folder(dest.parent, spec.name)
    background = ThreadPoolExecutor(1, thread_name_prefix="modelship-verify")
    try:
        yield Workspace(staging, steps, background)
    finally:
        background.shutdown(cancel_futures=True)
        shutil.rmtree(staging, ignore_errors=True)
        remove_if_empty(created)


def refuse_existing(dest: Path, force: bool) -> None:
    """ExportError when `dest` exists and `force` is off (checked first, and again just before the move)."""
    if dest.exists() and not force:
        raise ExportError(
            f"{dest} already exists",
            hint="pass --force to replace it, or choose another --name/--out",
            details={"folder": str(dest)},
        )


def move_into_place(staging: Path, dest: Path, force: bool) -> None:
    """Rename the finished staging folder to `dest` with one journaled commit (contract.staging); with `force`, an
    existing export is moved aside in the same commit and deleted once the new one is in place."""
    if dest.exists() and not force:
        refuse_existing(dest, force)
    changes = StagedChanges(staging_folder(dest.parent, dest.name, "replaced"))
    if dest.exists():
        changes.remove(dest)
    changes.new(staging, dest)
    try:
        commit(changes, _unmovable)
    finally:
        shutil.rmtree(changes.folder, ignore_errors=True)


def _unmovable(path: Path, exc: OSError) -> ExportError:
    return os_failure(ExportError, exc, f"{path}: cannot move the export into place", "check the folder's permissions")
