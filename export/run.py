"""The export run: eager model -> every format asked for (export.formats, fp32) and their variants at the precisions
asked for (contract.artifacts.Variant: fp16, INT8) -> verified against eager -> export folder.

Every artifact is compared with the eager model by the parity engine on the same seeded inputs, at every batch
size asked for and at a second size of every other dynamic axis, with the compare function the task gives each
output. Everything is built in a staging folder next to the destination (same filesystem) and moved into place only
when every artifact passed, so a failed or interrupted export never leaves a half-written folder; `force` replaces
an existing export by two renames.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from torch import nn

from modelship import __version__
from modelship.checkpoint.families.model_hooks import score_threshold
from modelship.checkpoint.metadata import CheckpointMetadata
from modelship.contract.artifacts import (
    EXPORT_FILES,
    GOLDEN_FILE,
    SIDECAR_FILE,
    artifact_order,
    resolve_hook,
    variants_of,
)
from modelship.contract.errors import ExportError, ParityError, os_failure
from modelship.contract.iospec import IOSpec
from modelship.contract.jsonfile import JsonObject
from modelship.contract.manifest import Artifact, Declined, ExportFile, Manifest, Source, StepTiming, sha256_file
from modelship.contract.opsets import resolve_opset, runtime_target
from modelship.contract.precisions import PRECISIONS
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
from modelship.export.build import Build, BuiltArtifact, Finish, Verification, make_verification
from modelship.export.formats import exporters_for
from modelship.export.io_resolve import ResolvedInputs, base_sizes, discover_outputs, resolve_inputs, torch_inputs
from modelship.export.labels import default_labels
from modelship.export.onnx_export import DEFAULT_EXPORTER, LEGACY_MAX_OPSET, provenance_metadata
from modelship.export.spec import ExportSpec
from modelship.export.steps import Steps
from modelship.export.text_inputs import text_input_sets
from modelship.parity import ParityReport, save_golden
from modelship.parity.localize import Explanation
from modelship.tasks import Task, choose_task


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
) -> ExportResult:
    """Export, verify and write `spec.out_dir`. Raises ExportError/ParityError with nothing written on failure.

    `metadata` is the checkpoint's metadata (its io, labels, task); `preprocess` the model's preprocessing spec
    when known (the loader's `LoadedModel.preprocess`); `sidecar` is written as checkpoint.json beside the
    artifacts; `tokenizer` (a text model's) feeds the verification real sentences and is copied into the export.
    """
    metadata = metadata or CheckpointMetadata()
    dest = spec.out_dir
    refuse_existing(dest, spec.force)
    target = runtime_target(spec.triton)
    model = model.eval()
    steps = steps or Steps()

    with steps("resolve inputs and outputs"):
        resolved, io, task = _resolve(model, spec, source, metadata, preprocess)
    for variant in (v for f in spec.formats for v in variants_of(f, spec.precisions)):
        if variant.check is not None:
            resolve_hook(variant.check)(spec, preprocess, tokenizer)
    spec = replace(
        spec,
        exporter=spec.exporter or task.onnx_exporter or DEFAULT_EXPORTER,
        score_threshold=score_threshold(model),
        task=task.name,
    )
    opset = resolve_opset(spec.opset, target, LEGACY_MAX_OPSET if spec.exporter == "legacy" else None)
    with steps("reference outputs (eager)"):
        texts = text_input_sets(tokenizer, spec.batch_sizes) if tokenizer is not None else None
        verification = make_verification(model, io, resolved, spec, task.output_kinds(io), texts)
    provenance = provenance_metadata(
        name=spec.name,
        checkpoint_sha256=source.sha256,
        arch=source.arch,
        version=__version__,
        io=io.to_dict(),
        preprocess=preprocess.to_dict() if preprocess is not None else None,
    )
    example = torch_inputs(io, base_sizes(resolved), spec.seed)

    created = missing_parents(dest)  # removed again when the export fails: nothing half-written, not even --out
    sweep(writable_parent(dest, "the export"))
    staging = staging_folder(dest.parent, spec.name)
    # TorchScript verifications run on a second thread while the other formats export: the eager half forward
    # takes one core only (torch computes float16 on the CPU single-threaded) and the exporters mostly hold the GIL
    # in Python. The thread only runs the reloaded ScriptModules; everything touching the eager model stays here.
    background = ThreadPoolExecutor(1, thread_name_prefix="modelship-verify")
    try:
        build = Build(
            model,
            spec,
            io,
            example,
            verification,
            staging,
            steps,
            opset,
            target,
            provenance,
            background,
            task,
            preprocess,
            tokenizer,
        )
        made = _build_artifacts(build)
        artifacts, reports = made.artifacts, made.reports
        if made.declined and spec.require_variants:
            raise ExportError(
                "; ".join(d.reason for d in made.declined),
                hint="nothing was written (--require-variants); without it the verified artifacts are written and "
                "the declined variant left out",
                details={"declined": [d.to_dict() for d in made.declined]},
            )
        failed = [name for name, report in reports.items() if not report.passed]
        if failed:
            failing = [
                (a, reports[a.name], made.judged.get(a.name, verification)) for a in artifacts if a.name in failed
            ]
            explained = _explain(staging, failing, model, io)
            raise ParityError(
                f"{', '.join(failed)} differ{'s' if len(failed) == 1 else ''} from eager PyTorch beyond tolerance: "
                + "; ".join(
                    f"{name}: {', '.join(reports[name].failures()[:2])}"
                    + (f" - {explained[name].lines()[0]}" if name in explained else "")
                    for name in failed
                ),
                hint=f"see the parity table; loosen with {_loosening(failing)} or a --tolerances file only if the "
                "difference is acceptable",
                details={
                    "artifacts": {name: r.to_dict() for name, r in reports.items()},
                    "failed": failed,
                    "explain": {name: e.to_dict() for name, e in explained.items()},
                },
            )
        save_golden(staging / GOLDEN_FILE, verification.inputs, verification.outputs)
        files = [_copy_tokenizer(tokenizer, staging)] if tokenizer is not None else []
        files += [ExportFile("golden", name, sha256_file(staging / name)) for name in made.files]
        if sidecar is not None:
            (staging / SIDECAR_FILE).write_text(json.dumps(sidecar, indent=2, default=str) + "\n")
        manifest = Manifest(
            name=spec.name,
            source=source,
            io=io,
            artifacts=artifacts,
            task=task.name,
            preprocess=preprocess,
            labels=(metadata.labels or default_labels(source.arch, io.outputs[0])) if task.labels else None,
            tokenizer=tokenizer.spec if tokenizer is not None else None,
            files=files,
            score_threshold=spec.score_threshold,
            golden=GOLDEN_FILE,
            timings=list(steps.timings),
            declined=made.declined,
            tool_version=__version__,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        manifest.write(staging)
        _move_into_place(staging, dest, spec.force)
    finally:
        background.shutdown(cancel_futures=True)  # on a failure, verifications not started are dropped
        shutil.rmtree(staging, ignore_errors=True)
        remove_if_empty(created)
    return ExportResult(manifest, dest, reports, steps.timings)


def _copy_tokenizer(tokenizer: TokenizerSource, staging: Path) -> ExportFile:
    """The tokenizer copied into the export, recorded with the sha256 of the copy (publish and parity check it)."""
    target = staging / tokenizer.spec.file
    shutil.copyfile(tokenizer.path, target)
    return ExportFile("tokenizer", tokenizer.spec.file, sha256_file(target))


def _resolve(
    model: nn.Module, spec: ExportSpec, source: Source, metadata: CheckpointMetadata, preprocess: PreprocessSpec | None
) -> tuple[ResolvedInputs, IOSpec, Task]:
    """The inputs, the outputs they give and the task; a task whose models take images of any size (segmentation)
    gets its dynamic axes when the inputs come from the architecture and --dynamic said nothing."""

    def resolve(dynamic: tuple[str, ...]) -> tuple[ResolvedInputs, IOSpec]:
        resolved = resolve_inputs(
            model,
            arch=source.arch,
            io=metadata.io,
            preprocess=preprocess,
            input_options=spec.input_options,
            dynamic=dynamic,
        )
        return resolved, discover_outputs(model, resolved)

    resolved, io = resolve(spec.dynamic)
    task = choose_task(io, spec.task or metadata.task)
    if task.dynamic and not spec.dynamic and resolved.source == "architecture":
        resolved, io = resolve(task.dynamic)
    return resolved, io, task


def _explain(
    folder: Path, failed: list[tuple[Artifact, ParityReport, Verification]], model: nn.Module, io: IOSpec
) -> dict[str, Explanation]:
    """Where each failing artifact parts from eager PyTorch (export.explain), on the first input set it failed (of
    the sets it was judged on)."""
    from modelship.export.explain import explain_artifact

    explained = {}
    for artifact, report, verification in failed:
        inputs = verification.inputs[report.first_failed_set()]
        if artifact.io.max_rows:  # a single-row graph (a detector's ONNX) is localised on the set's first row
            inputs = {name: value[: artifact.io.max_rows] for name, value in inputs.items()}
        try:
            explained[artifact.name] = explain_artifact(folder, artifact, model, io, inputs)
        except Exception as exc:  # localisation is a diagnosis: its own failure must not hide the parity verdict
            explained[artifact.name] = _not_localised(artifact.name, exc)
    return explained


def _not_localised(name: str, exc: Exception) -> Explanation:
    return Explanation(name, None, 0, [f"could not localise: {type(exc).__name__}: {exc}"])


def refuse_existing(dest: Path, force: bool) -> None:
    """ExportError when `dest` exists and `force` is off (checked first, and again just before the move)."""
    if dest.exists() and not force:
        raise ExportError(
            f"{dest} already exists",
            hint="pass --force to replace it, or choose another --name/--out",
            details={"folder": str(dest)},
        )


@dataclass
class _Made:
    """What the artifact steps made: the artifacts in a manifest's order and their verdicts, the variants declined,
    the files written besides the artifacts, and the sets an artifact was judged on when not the export's."""

    artifacts: list[Artifact]
    reports: dict[str, ParityReport]
    declined: list[Declined]
    files: list[str]
    judged: dict[str, Verification]


def _loosening(failing: list[tuple[BuiltArtifact, ParityReport, Verification]]) -> str:
    """The tolerance flags of the failing artifacts' precisions (--atol/--rtol, --int8-atol/--int8-rtol, ...)."""
    flags = dict.fromkeys(PRECISIONS[artifact.precision].tolerance_flag for artifact, _, _ in failing)
    return ", ".join(f"{flag}atol/{flag}rtol" for flag in flags)


def _build_artifacts(build: Build) -> _Made:
    """Every format's exporter started (export.formats, in their order), each fp32 artifact's variants at the
    precisions asked for started right after it, then each finished and recorded with its size, step times and
    sha256."""
    finishing: list[Finish] = []
    for exporter in exporters_for(build.spec.formats):
        for started in exporter.start(build):
            finishing.append(started.finish)
            for variant in variants_of(started.written.format, build.spec.precisions):
                finishing.append(resolve_hook(variant.build)(build, started.written))
    results = [finish() for finish in finishing]
    order = artifact_order()
    built = sorted((r for r in results if isinstance(r, BuiltArtifact)), key=lambda b: order.index(b.name))
    artifacts = []
    for art in built:
        path = build.path(art.name)
        details = replace(art.details, bytes=path.stat().st_size, seconds=build.steps.seconds(art.name))
        digest = art.sha256 or sha256_file(path)
        file = EXPORT_FILES[art.name]
        artifacts.append(Artifact(art.name, art.format, art.precision, file, digest, art.io, art.report, details))
    return _Made(
        artifacts,
        {art.name: art.report for art in built},
        [r for r in results if isinstance(r, Declined)],
        [f for art in built for f in art.files],
        {art.name: art.judged for art in built if art.judged is not None},
    )


def _move_into_place(staging: Path, dest: Path, force: bool) -> None:
    """Rename the finished staging folder to `dest` with one journaled commit (contract.staging); with `force`, an
    existing export is moved aside in the same commit and deleted once the new one is in place."""
    if dest.exists() and not force:
        refuse_existing(dest, force)
    plan = StagedChanges(staging_folder(dest.parent, dest.name, "replaced"))
    if dest.exists():
        plan.remove(dest)
    plan.new(staging, dest)
    try:
        commit(plan, _unmovable)
    finally:
        shutil.rmtree(plan.folder, ignore_errors=True)


def _unmovable(path: Path, exc: OSError) -> ExportError:
    return os_failure(ExportError, exc, f"{path}: cannot move the export into place", "check the folder's permissions")
