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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelship.contract.errors import ModelshipError, ParityError, UsageError
from modelship.contract.manifest import MANIFEST_NAME, Artifact, Manifest, sha256_file
from modelship.contract.preprocessing import PreprocessSpec
from modelship.export.parity import ParityReport, ToleranceOverrides
from modelship.export.parity.engine import candidate_error
from modelship.export.parity.pipelines import IMAGES

AGAINST = ("checkpoint", "golden")


@dataclass(frozen=True)
class ReferenceChoice:
    """What the artifacts are compared with: the checkpoint rebuilt in eager PyTorch (`checkpoint`: where it is
    now, `arch`: the architecture to rebuild it with, else the manifest's) at seeded `batch_sizes`, plus the image
    files of `images`; or the golden data saved at export."""

    against: str = "checkpoint"
    checkpoint: Path | None = None
    arch: str | None = None
    batch_sizes: tuple[int, ...] = (1, 8)
    seed: int = 0
    images: Path | None = None
    preprocess_file: Path | None = None  # the serving spec for `images`, instead of the manifest's

    def __post_init__(self) -> None:
        if self.against not in AGAINST:
            raise UsageError(f"unknown reference {self.against!r}", hint=f"use one of {', '.join(AGAINST)}")
        if self.images is not None and self.against == "golden":
            raise UsageError("--images needs --against checkpoint", hint="golden data holds outputs for its own inputs")


@dataclass(frozen=True)
class Candidate:
    """One more thing to check besides the export's artifacts (a served model): its runner, judged by the
    tolerances of `precision`; it takes the export's inputs."""

    runner: Any
    precision: str = "fp32"


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
        if self.explain and self.reference.against == "golden":
            raise UsageError("--explain needs --against checkpoint", hint="it compares every module with eager PyTorch")


@dataclass
class CheckResult:
    manifest: Manifest
    against: str  # ReferenceChoice.against
    reference: str  # the reference runner's name: "eager" or "golden"
    labels: list[str]  # one per input set
    reports: list[ParityReport]
    images: dict[str, Any]  # with `images`: both pipelines and how far apart their model inputs are
    diagnoses: dict[str, str]  # candidate -> why it failed, when the preprocessing is the cause
    explained: dict[str, Any]  # candidate -> export.parity.localize.Explanation

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.reports)

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "ok": self.passed,
            "export": self.manifest.name,
            "against": self.against,
            "inputs": self.labels,
            "passed": self.passed,
            "reports": [r.to_dict() for r in self.reports],
        }
        if self.images:
            payload["image_pipelines"] = self.images
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
    artifacts = select_artifacts(manifest, request.artifacts)
    serving = _serving_spec(manifest, choice.preprocess_file) if choice.images else None
    with status("checking artifact files against the manifest"):
        changed = {a.name: reason for a in artifacts if (reason := changed_since_export(folder, a))}
    with status("preparing reference"):
        reference, sets, labels, images, model = _reference(manifest, folder, choice, serving)
    reports = []
    for artifact in artifacts:
        if artifact.name in changed:
            reports.append(_unchecked(reference.name, artifact.name, changed[artifact.name]))
            continue
        with artifact_runner(folder, artifact, isolated=request.isolate) as runner, status(f"checking {runner.name}"):
            candidate = _serving(runner, serving, artifact.io)
            reports.append(_compare(reference, candidate, sets, labels, request.tolerances.config(artifact.precision)))
    for extra in request.extra:
        tolerance = request.tolerances.config(extra.precision)
        try:
            takes_images = getattr(extra.runner, "takes_images", False)
        except ModelshipError as exc:  # the server is down or does not serve the model: this candidate fails
            reports.append(_unchecked(reference.name, extra.runner.name, candidate_error(exc)))
            continue
        if takes_images:  # a served pipeline: image files in, end to end
            chosen = [i for i, inputs in enumerate(sets) if IMAGES in inputs]
            if not chosen:
                raise UsageError(f"{extra.runner.name} takes encoded images", hint="compare it with --images DIR")
            with status(f"checking {extra.runner.name}"):
                picked = [sets[i] for i in chosen], [labels[i] for i in chosen]
                reports.append(_compare(reference, extra.runner, *picked, tolerance))
            continue
        runner = _serving(extra.runner, serving, manifest.io)
        with status(f"checking {runner.name}"):
            reports.append(_compare(reference, runner, sets, labels, tolerance))
    image_labels = {label for label, inputs in zip(labels, sets, strict=True) if IMAGES in inputs}
    diagnoses = {r.candidate: d for r in reports if (d := _preprocessing_diagnosis(r, image_labels, images))}
    result = CheckResult(manifest, choice.against, reference.name, labels, reports, images, diagnoses, {})
    if request.explain and not result.passed:
        with status("localising the failures"):
            result.explained = _explain(folder, manifest, [r for r in reports if not r.passed], changed, model, sets)
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
    path = folder / artifact.file
    if not path.is_file():
        return f"{path.name} is missing (artifact {artifact.name!r} listed in the manifest; re-export)"
    actual = sha256_file(path)
    if not artifact.sha256 or actual == artifact.sha256:
        return None
    return (
        f"{path.name} changed since export: sha256 {actual[:12]}, manifest {artifact.sha256[:12]} "
        "(re-export, or restore the verified file)"
    )


@contextlib.contextmanager
def artifact_runner(folder: Path, artifact: Artifact, *, isolated: bool = True) -> Iterator[Any]:
    """The runner of one artifact file of an export, closed afterwards."""
    from modelship.export.parity import OnnxRuntimeRunner, TorchRunner

    path = folder / artifact.file
    if artifact.format in ("pt2", "aoti"):
        from modelship.export.pt2_export import load_aoti, load_program

        yield TorchRunner((load_program if artifact.format == "pt2" else load_aoti)(path), artifact.io, artifact.name)
        return
    if artifact.format != "onnx":
        yield TorchRunner(_load_torchscript(path), artifact.io, name=artifact.name)
        return
    runner = OnnxRuntimeRunner(path, artifact.io, name=artifact.name, isolated=isolated)
    try:
        yield runner
    finally:
        runner.close()


def _explain(
    folder: Path, manifest: Manifest, failed: list[ParityReport], changed: dict[str, str], model: Any, sets: list[Any]
) -> dict[str, Any]:
    """export.explain for each failing artifact (not extra candidates, not files changed since export), on the
    first random input set it failed (image sets go through preprocessing: the random ones localise the model)."""
    from modelship.export.explain import explain_artifact

    names = {a.name: a for a in manifest.artifacts}
    explained = {}
    for report in failed:
        artifact = names.get(report.candidate)
        if artifact is None or artifact.name in changed:
            continue
        index = report.first_failed_set(lambda i: IMAGES not in sets[i])
        explained[artifact.name] = explain_artifact(folder, artifact, model, manifest.io, sets[index])
    return explained


def _reference(
    manifest: Manifest, folder: Path, choice: ReferenceChoice, serving: tuple[PreprocessSpec, str] | None
) -> tuple[Any, list[Any], list[str], dict[str, Any], Any]:
    """The reference runner (outputs computed once and replayed), the input sets, their labels, with images
    both image pipelines and how far apart their model inputs are, and the eager model (None against golden)."""
    from modelship.export.parity import GoldenRunner, TorchRunner, input_sets, load_golden

    if choice.against == "golden":
        if not manifest.golden:
            raise ParityError(f"export {manifest.name!r} has no golden data", hint="use --against checkpoint")
        inputs, outputs = load_golden(folder / manifest.golden)
        labels = [f"golden set {i}" for i in range(len(inputs))]
        return GoldenRunner(inputs, outputs, name="golden"), inputs, labels, {}, None
    loaded, checkpoint = _rebuild(manifest, folder, choice.checkpoint, choice.arch)
    eager: Any = TorchRunner(loaded.model, manifest.io, name="eager")
    sets = input_sets(manifest.io, choice.batch_sizes, seed=choice.seed)
    labels = [f"batch {b}" for b in choice.batch_sizes]
    images: dict[str, Any] = {}
    if serving is not None and choice.images is not None:
        from modelship.export.parity import pipelines
        from modelship.preprocess import image_files

        image = pipelines.image_input(manifest.io)
        files = image_files(choice.images)
        transform = pipelines.training_transform(loaded.model, loaded.arch, loaded.preprocess, str(checkpoint))
        eager = pipelines.training_pipeline(eager, transform, image.name)
        difference = pipelines.preprocessing_difference(
            eager.preprocess, pipelines.serving_preprocess(serving[0], image.dtype), files
        )
        images = {"reference": transform.source, "candidates": f"preprocess/ with {serving[1]}", **difference}
        sets.append(pipelines.image_set(files[:1]))
        labels.append(f"image {files[0].name}")
        if len(files) > 1:  # images at a second batch size
            sets.append(pipelines.image_set(files))
            labels.append(f"{len(files)} images from {choice.images}")
    # eager outputs computed once, replayed for every candidate
    return GoldenRunner(sets, [eager.run(s) for s in sets], name="eager"), sets, labels, images, loaded.model


def _rebuild(manifest: Manifest, folder: Path, checkpoint: Path | None, arch: str | None) -> tuple[Any, Path]:
    """The LoadedModel rebuilt from the manifest's source (its sha256 checked before anything is read from it),
    and the checkpoint path it came from. The manifest is a data file: its arch may only name a registry model."""
    from modelship.export.checkpoint import LoadOptions, load_model
    from modelship.export.checkpoint.arch import check_data_arch

    source = manifest.source
    if arch is None:
        check_data_arch(source.arch, source.arch_kwargs, file=str(folder / MANIFEST_NAME), field="source.arch")
    path = checkpoint or _checkpoint_path(source.checkpoint, folder)
    options = LoadOptions(
        checkpoint=path,
        arch=arch or source.arch,
        arch_kwargs=dict(source.arch_kwargs or {}),
        expected_sha256=source.sha256 or None,
    )
    return load_model(options), path


def _checkpoint_path(recorded: str, folder: Path) -> Path:
    """The recorded path as given at export time (relative to the current folder), else relative to the export."""
    path = Path(recorded)
    for candidate in (path, folder / path):
        if candidate.is_file():
            return candidate
    raise ParityError(
        f"checkpoint {recorded} recorded in {folder / MANIFEST_NAME} not found",
        hint="pass it with --checkpoint, or use --against golden",
    )


def _serving_spec(manifest: Manifest, preprocess_file: Path | None) -> tuple[PreprocessSpec, str]:
    """The serving side's preprocessing for images (`preprocess_file`, else the manifest's) and its origin."""
    if preprocess_file is not None:
        return PreprocessSpec.read(preprocess_file), str(preprocess_file)
    if manifest.preprocess is None:
        raise UsageError(
            f"export {manifest.name!r} has no preprocessing spec in its manifest.json (the serving side of --images)",
            hint="export from a checkpoint whose metadata holds 'preprocess', or pass --preprocess FILE",
        )
    return manifest.preprocess, "manifest.json preprocess"


def _serving(runner: Any, serving: tuple[PreprocessSpec, str] | None, io: Any) -> Any:
    """`runner` behind the serving preprocessing when images are compared, else `runner` itself."""
    if serving is None:
        return runner
    from modelship.export.parity.pipelines import image_input, serving_pipeline

    return serving_pipeline(runner, serving[0], image_input(io), source=serving[1])


def _preprocessing_diagnosis(report: ParityReport, image_labels: set[str], images: dict[str, Any]) -> str | None:
    """Why a candidate failed on images, when the preprocessing is the cause: the two pipelines' model inputs
    differ, and (if the candidate ran) its random input sets passed."""
    if report.passed or not images or images["matches"]:
        return None
    rows = report.per_batch or []
    randoms = [row for row in rows if row["label"] not in image_labels]
    if not report.error and not all(row["passed"] for row in randoms):
        return None
    if images["max_abs"] is None:
        found = f"shape {images['serving_shape']}, the training transforms give {images['training_shape']}"
    else:
        found = f"model inputs differ by up to {images['max_abs']:.3g} (mean {images['mean_abs']:.3g})"
    return (
        f"the serving preprocessing ({images['candidates']}) does not reproduce the training transforms "
        f"({images['reference']}): {found}; check mean/std, channel order, resize/crop, interpolation"
    )


def _unchecked(reference: str, name: str, reason: str) -> ParityReport:
    return ParityReport(reference, name, [], [], passed=False, seconds=0.0, error=reason)


def _load_torchscript(path: Path) -> Any:
    from modelship.export.torchscript import load_torchscript

    try:
        return load_torchscript(path)
    except RuntimeError as exc:
        raise ParityError(f"{path}: TorchScript file cannot be loaded ({str(exc).splitlines()[0]})") from None


def _compare(reference: Any, runner: Any, sets: list[Any], labels: list[str], tolerance: Any) -> ParityReport:
    from modelship.export.parity import compare_runners

    return compare_runners(reference, runner, sets, tolerance, labels=labels)
