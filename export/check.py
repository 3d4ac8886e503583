"""`check_export`: re-check an export folder's artifacts against eager PyTorch or its golden data.

The library side of `modelship parity` (the command parses flags into a `CheckRequest`, builds the served runner
when asked, and prints). Reads manifest.json, builds the reference (the checkpoint rebuilt in eager PyTorch, its
sha256 checked first, or the saved golden outputs), runs every chosen artifact, plus any extra candidates, on the
same inputs (seeded random batches or the golden inputs) and judges them with the same engine and tolerances as
export-model. With `images` the comparison is end to end: the image files go through the training preprocessing
(torch) into eager PyTorch, and through the serving preprocessing (preprocess/ with the manifest's spec) into each
candidate, so a wrong preprocessing spec fails too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelship.contract.errors import ParityError, UsageError
from modelship.contract.iospec import IOSpec
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import Artifact, Manifest, file_change
from modelship.contract.preprocessing import PreprocessSpec
from modelship.export.check_reference import Against, ReferenceChoice, build_reference, own_reference
from modelship.export.formats.runners import artifact_runner
from modelship.parity import ParityReport, ToleranceOverrides
from modelship.parity.engine import candidate_error
from modelship.parity.image_inputs import IMAGES, PreprocessingDifference
from modelship.parity.localize import Explanation
from modelship.parity.runner_protocol import Runner, SetKind
from modelship.parity.text_sets import Tokenize
from modelship.tasks import Task, get_task


@dataclass(frozen=True)
class Candidate:
    """One more thing to check besides the export's artifacts (a served model): its runner, judged by the
    tolerances of `precision`; it takes the export's inputs, or those `artifact` was judged on (an INT8 variant's
    held-back inputs) when it serves that artifact."""

    runner: Runner
    precision: str = "fp32"
    artifact: str | None = None


@dataclass(frozen=True)
class CheckRequest:
    folder: Path
    reference: ReferenceChoice = field(default_factory=ReferenceChoice)
    artifacts: tuple[str, ...] = ()  # default: all of the manifest's
    tolerances: ToleranceOverrides = field(default_factory=ToleranceOverrides)
    isolate: bool = True  # ONNX Runtime in a child process: a native crash is reported, not fatal
    explain: bool = False  # localise every failure (needs the checkpoint reference)
    extra: tuple[Candidate, ...] = ()

    def __post_init__(self) -> None:
        if self.explain and self.reference.against is Against.GOLDEN:
            raise UsageError("--explain needs --against checkpoint", hint="it compares every module with eager PyTorch")


@dataclass
class CheckResult:
    manifest: Manifest
    against: Against  # ReferenceChoice.against
    reference: str  # the reference runner's name: "eager" or "golden"
    labels: list[str]  # one per input set
    reports: list[ParityReport]
    images: PreprocessingDifference | None  # with `images`: how far apart both pipelines' model inputs are
    diagnoses: dict[str, str]  # candidate -> why it failed, when the preprocessing is the cause
    explained: dict[str, Explanation]  # artifact -> where it parts from eager PyTorch

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.reports)

    def to_dict(self) -> JsonObject:
        payload: JsonObject = {
            "ok": self.passed,
            "export": self.manifest.name,
            "against": self.against,
            "inputs": self.labels,
            "passed": self.passed,
            "reports": [r.to_dict() for r in self.reports],
        }
        if self.images is not None:
            payload["image_pipelines"] = self.images.to_dict()
        if self.diagnoses:
            payload["diagnosis"] = self.diagnoses
        if self.explained:
            payload["explain"] = {name: e.to_dict() for name, e in self.explained.items()}
        return payload


Status = Callable[[str], contextlib.AbstractContextManager[Any]]


def check_export(request: CheckRequest, status: Status = lambda _: contextlib.nullcontext()) -> CheckResult:
    """Check the export; `status(what)` wraps each long step (the CLI shows a spinner)."""
    folder, choice = request.folder, request.reference
    manifest = Manifest.read(folder)
    task = get_task(manifest.task)
    kinds = task.output_kinds(manifest.io)
    artifacts = select_artifacts(manifest, request.artifacts)
    serving = _serving_spec(manifest, choice.preprocess) if choice.images else None
    tokenize = _serving_tokenizer(manifest, folder) if choice.texts else None
    with status("checking artifact files against the manifest"):
        manifest.refuse_changed_files(folder, ParityError)  # the tokenizer: every candidate depends on it
        changed = {a.name: reason for a in artifacts if (reason := changed_since_export(folder, a))}
    with status("preparing reference"):
        reference = build_reference(manifest, folder, choice, serving)
    reports = []
    judged_sets: dict[str, list[Any]] = {}  # an artifact judged on inputs of its own: those
    for artifact in artifacts:
        tolerance = request.tolerances.config(artifact.precision, manifest.task)
        tolerance = tolerance.with_score_edge(manifest.score_threshold)
        if artifact.name in changed:
            reports.append(_unchecked(reference.name, artifact.name, changed[artifact.name]))
            continue
        with contextlib.ExitStack() as stack, status(f"checking {artifact.name}"):
            try:
                runner = stack.enter_context(artifact_runner(folder, artifact, isolated=request.isolate))
            except Exception as exc:  # a file that cannot be loaded is this artifact's verdict
                reports.append(_unchecked(reference.name, artifact.name, candidate_error(exc)))
                continue
            judged_by = own_reference(reference, artifact, folder, manifest)
            judged_sets[artifact.name] = judged_by.sets
            reports.append(judged_by.judge(_serving(runner, serving, tokenize, artifact.io, task), tolerance, kinds))
    for extra in request.extra:
        tolerance = request.tolerances.config(extra.precision, manifest.task)
        tolerance = tolerance.with_score_edge(manifest.score_threshold)
        with status(f"checking {extra.runner.name}"):
            try:
                takes = extra.runner.takes
            except Exception as exc:  # the server is down or does not serve the model: this candidate fails
                reports.append(_unchecked(reference.name, extra.runner.name, candidate_error(exc)))
                continue
            runner = (
                extra.runner
                if takes is not SetKind.TENSORS
                else _serving(extra.runner, serving, tokenize, manifest.io, task)
            )
            served = manifest.artifact(extra.artifact) if extra.artifact else None
            judged_by = own_reference(reference, served, folder, manifest) if served else reference
            reports.append(judged_by.judge(runner, tolerance, kinds))
    image_labels = {label for label, inputs in zip(reference.labels, reference.sets, strict=True) if IMAGES in inputs}
    diagnoses = {r.candidate: d for r in reports if (d := _preprocessing_diagnosis(r, image_labels, reference.images))}
    result = CheckResult(
        manifest, choice.against, reference.name, reference.labels, reports, reference.images, diagnoses, {}
    )
    if request.explain and not result.passed:
        with status("localising the failures"):
            failed = [r for r in reports if not r.passed]
            sets = {name: judged_sets.get(name, reference.sets) for name in (r.candidate for r in failed)}
            result.explained = _explain(folder, manifest, failed, changed, reference.model, sets)
    return result


def select_artifacts(manifest: Manifest, names: Sequence[str]) -> list[Artifact]:
    """The manifest's artifacts named (all when none are), or a ManifestError naming the unknown one."""
    if not names:
        if not manifest.artifacts:
            raise UsageError(f"export {manifest.name!r} lists no artifacts")
        return list(manifest.artifacts)
    return [manifest.artifact(name) for name in names]


def changed_since_export(folder: Path, artifact: Artifact) -> str | None:
    """Why the artifact's file is not the one the export verified (missing, or its sha256 differs), or None."""
    return file_change(folder, artifact.file, artifact.sha256, f"artifact {artifact.name!r}")


def _explain(
    folder: Path,
    manifest: Manifest,
    failed: list[ParityReport],
    changed: dict[str, str],
    model: Any,
    sets_of: dict[str, list[Any]],
) -> dict[str, Explanation]:
    """export.explain for each failing artifact (not extra candidates, not files changed since export), on the
    first random input set it failed (image sets go through preprocessing: the random ones localise the model)."""
    from modelship.export.explain import explain_artifact

    names = {a.name: a for a in manifest.artifacts}
    explained = {}
    for report in failed:
        artifact = names.get(report.candidate)
        if artifact is None or artifact.name in changed:
            continue
        sets = sets_of[artifact.name]
        index = report.first_failed_set(_random_set(sets))
        explained[artifact.name] = explain_artifact(folder, artifact, model, manifest.io, sets[index])
    return explained


def _random_set(sets: list[Any]) -> Callable[[int], bool]:
    """Whether the input set at an index is a random one (image sets go through preprocessing)."""
    return lambda index: IMAGES not in sets[index]


def _serving_spec(manifest: Manifest, preprocess: str | None) -> tuple[PreprocessSpec, str]:
    """The serving side's preprocessing for images (`preprocess`, else the manifest's) and its origin."""
    if preprocess is not None:
        return PreprocessSpec.from_option(preprocess), preprocess
    if manifest.preprocess is None:
        raise UsageError(
            f"export {manifest.name!r} has no preprocessing spec in its manifest.json (the serving side of --images)",
            hint="pass --preprocess (a JSON file, or key=value pairs such as resize=256,crop=224), or export with it",
        )
    return manifest.preprocess, "manifest.json preprocess"


def _serving_tokenizer(manifest: Manifest, folder: Path) -> Tokenize:
    """The serving side's tokenizer for texts: modelship's, on the export's tokenizer.json."""
    from modelship.parity.text_sets import modelship_tokenize

    if manifest.tokenizer is None:
        raise UsageError(
            f"export {manifest.name!r} has no tokenizer in its manifest.json (the serving side of --texts)",
            hint="--texts compares text models exported from a folder with its tokenizer.json",
        )
    return modelship_tokenize(folder / manifest.tokenizer.file, manifest.tokenizer)


def _serving(
    runner: Runner, serving: tuple[PreprocessSpec, str] | None, tokenize: Tokenize | None, io: IOSpec, task: Task
) -> Runner:
    """`runner` behind the serving preprocessing when images are compared, its tokenizer when texts are, else
    `runner` itself."""
    if tokenize is not None:
        from modelship.parity.text_sets import TextPipeline

        return TextPipeline(runner, tokenize)
    if serving is None:
        return runner
    from modelship.parity.image_inputs import boxes_on_photo, image_input, serving_pipeline

    spec, source = serving
    return serving_pipeline(runner, spec, image_input(io), source=source, boxes_on_photo=boxes_on_photo(task, spec))


def _preprocessing_diagnosis(
    report: ParityReport, image_labels: set[str], images: PreprocessingDifference | None
) -> str | None:
    """Why a candidate failed on images, when the preprocessing is the cause: the two pipelines' model inputs
    differ, and (if the candidate ran) its random input sets passed."""
    if report.passed or images is None or images.matches:
        return None
    randoms = [row for row in report.per_batch or [] if row.label not in image_labels]
    if not report.error and not all(row.passed for row in randoms):
        return None
    return images.diagnosis()


def _unchecked(reference: str, name: str, reason: str) -> ParityReport:
    return ParityReport(reference, name, [], [], passed=False, seconds=0.0, error=reason)
