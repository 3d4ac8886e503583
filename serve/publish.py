"""Publish an export folder to a Triton model repository: one Triton model per artifact, a new version each time.

    <repo>/<name>_<artifact>/config.pbtxt        ModelConfig (see serve.triton_config)
    <repo>/<name>_<artifact>/labels.txt          class labels, one per line (when known)
    <repo>/<name>_<artifact>/preprocess.json     the preprocessing spec (also in config parameters)
    <repo>/<name>_<artifact>/<N>/model.onnx|pt   the artifact, sha256-verified against the manifest
    <repo>/<name>_<artifact>/<N>/modelship.json  the export manifest, narrowed to this artifact, plus publish info

Model-level files describe the latest publish; version folders are immutable. See serve.repository for the
atomicity and locking guarantees.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelship import __version__
from modelship.contract.artifacts import PLATFORMS, SERVED_FILES
from modelship.contract.errors import PublishError, os_failure
from modelship.contract.labels import clean_labels
from modelship.contract.manifest import MANIFEST_NAME, Artifact, Manifest
from modelship.contract.opsets import runtime_target
from modelship.serve import repository
from modelship.serve.ensemble import (
    IMAGE,
    PIPELINE_SUFFIX,
    PREPROCESS_SUFFIX,
    WARMUP_DIR,
    PipelinePlan,
    pipeline_config,
    plan_pipeline,
    preprocess_config,
    serialized_bytes,
    stage_preprocess_files,
    warmup_image,
)
from modelship.serve.object_store import is_object_store
from modelship.serve.triton_config import (
    LABELS_FILE,
    ServingOptions,
    build_config,
    parse_config,
    to_text,
)
from modelship.tasks import Task, get_task

DEFAULT_REPO = Path("model_repo")
AUTO_PIPELINE = "auto"  # a pipeline over the ONNX fp32 artifact when one can be built, else a note saying why
AUTO_PIPELINE_ARTIFACT = "onnx"
MANIFEST_FILE = "modelship.json"
PREPROCESS_FILE = "preprocess.json"
CONFIG_FILE = "config.pbtxt"
_CHUNK = 1 << 20


@dataclass
class PublishedModel:
    name: str
    artifact: str
    version: int
    path: Path
    config: Path
    sha256: str


@dataclass
class PublishResult:
    repo: Path
    models: list[PublishedModel] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. why no pipeline was written

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.models]

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": str(self.repo),
            "models": [{k: str(v) if isinstance(v, Path) else v for k, v in vars(m).items()} for m in self.models],
            "notes": self.notes,
        }


@dataclass(frozen=True)
class PublishOptions:
    """What to publish and how, for any repository (a folder: publish_export; object storage: serve.s3_publish)."""

    name: str | None = None  # base model name; default: the export's
    artifacts: tuple[str, ...] | None = None  # default: every servable artifact
    version: int | None = None  # default: latest + 1
    labels: Path | None = None  # a labels file instead of the manifest's
    serving: ServingOptions | None = None
    pipeline: str | None = AUTO_PIPELINE  # or an artifact name, or None (no pipeline)

    def kwargs(self) -> dict[str, Any]:
        """As publish_export's keyword arguments."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return values | {"artifacts": list(self.artifacts) if self.artifacts else None}


def served_name(export_name: str, artifact: str) -> str:
    """The Triton model name of one artifact: `<export>_<artifact>` (resnet50_onnx, resnet50_torchscript_fp16)."""
    return f"{export_name}_{artifact}"


def publish_export(
    export_dir: Path,
    repo: Path | None = DEFAULT_REPO,
    *,
    name: str | None = None,
    artifacts: list[str] | None = None,
    version: int | None = None,
    labels: Path | None = None,
    serving: ServingOptions | None = None,
    pipeline: str | None = AUTO_PIPELINE,
) -> PublishResult:
    """Publish the chosen artifacts of `export_dir` (default: all) as `<name>_<artifact>` models in `repo`, served
    as `serving` says (default: ServingOptions()); with an image preprocessing spec, also `<name>_preprocess` and
    the ensemble `<name>_pipeline` over the `pipeline` artifact (serve.pipeline): "auto" picks the ONNX fp32 one
    and only notes why when none can be built; an artifact name must work; None writes no pipeline.

    All or nothing: every artifact is copied and sha256-verified into a staging folder and every config is built
    before the repository changes; then one journaled commit makes them all visible (serve.repository).
    """
    export_dir, repo = Path(export_dir), Path(repo or DEFAULT_REPO)
    repository.check_version(version)
    manifest = Manifest.read(export_dir)
    base = repository.check_model_name(manifest.name if name is None else name)
    chosen = _choose(manifest, artifacts)
    task = get_task(manifest.task)
    label_list = _labels(manifest, labels, export_dir, task)
    options = serving or ServingOptions()
    result = PublishResult(repo=repo.resolve())
    model_names = {art.name: repository.check_model_name(served_name(base, art.name)) for art in chosen}
    for art in chosen:
        _check_labels(art, label_list)
    pipe, note = _pipeline_plan(manifest, chosen, model_names, base, pipeline, task)
    result.notes += [note] if note else []
    with repository.locked(repo):
        staged = _Staging(repository.Plan(repository.staging_dir(repo)), repo, options, version, label_list)
        for art in chosen:
            result.models.append(_stage(staged, export_dir, manifest, art, model_names[art.name]))
        if pipe is not None:
            result.models += _stage_pipeline(staged, pipe)
        repository.commit(staged.plan)
    return result


@dataclass(frozen=True)
class _Staging:
    """What every model staged by one publish shares: the commit plan, the repository, how models are served,
    the version asked for and the labels."""

    plan: repository.Plan
    repo: Path
    options: ServingOptions
    version: int | None
    labels: list[str] | None


def _pipeline_plan(
    manifest: Manifest,
    chosen: list[Artifact],
    model_names: dict[str, str],
    base: str,
    artifact: str | None,
    task: Task,
) -> tuple[PipelinePlan | None, str | None]:
    """The pipeline to publish (None when not wanted or, by default only, impossible) and the note saying why there
    is none; asked for explicitly, a pipeline that cannot be built is an error."""
    if artifact is None:
        return None, None
    explicit = artifact != AUTO_PIPELINE
    artifact = AUTO_PIPELINE_ARTIFACT if artifact == AUTO_PIPELINE else artifact
    published = {a.name: a for a in chosen}
    try:
        if task.preprocessing != "image":
            raise PublishError(f"task {task.name!r} takes no image preprocessing", hint="publish without --pipeline")
        if artifact not in published:
            raise PublishError(
                f"--pipeline-artifact {artifact}: that artifact is not being published",
                hint=f"publish it too (--artifact {artifact}), or choose one of {', '.join(published)}",
            )
        for suffix in (PREPROCESS_SUFFIX, PIPELINE_SUFFIX):
            repository.check_model_name(base + suffix)
        return plan_pipeline(base, model_names[artifact], published[artifact], manifest.preprocess), None
    except PublishError as exc:
        if explicit:
            raise
        return None, f"no {base}{PIPELINE_SUFFIX}: {exc.message}"


def _choose(manifest: Manifest, wanted: list[str] | None) -> list[Artifact]:
    """The artifacts to publish: all the target Triton can load (others are left out), or exactly those asked for
    (one it cannot load is refused, naming the target)."""
    if not manifest.artifacts:
        raise PublishError(f"export {manifest.name!r} has no artifacts", hint="run export-model first")
    if not wanted:
        return [a for a in manifest.artifacts if a.format in PLATFORMS]
    known = {a.name: a for a in manifest.artifacts}
    missing = [w for w in wanted if w not in known]
    if missing:
        raise PublishError(
            f"export {manifest.name!r} has no artifact {missing[0]!r}", hint=f"artifacts: {', '.join(known)}"
        )
    unservable = [w for w in wanted if known[w].format not in PLATFORMS]
    if unservable:
        target = runtime_target()
        raise PublishError(
            f"artifact {unservable[0]!r} ({known[unservable[0]].format}) cannot be served by Triton {target.triton} "
            f"(container {target.container}): its PyTorch backend loads TorchScript only",
            hint="publish the onnx or torchscript artifacts; AOTInductor packages need a Triton with torch_aoti",
        )
    return [known[w] for w in dict.fromkeys(wanted)]


def _labels(manifest: Manifest, path: Path | None, export_dir: Path, task: Task) -> list[str] | None:
    """The labels to publish: the --labels file (one per line), else the manifest's, one line each; none for a
    task without labels."""
    if not task.labels:
        if path is not None:
            raise PublishError(f"--labels: task {task.name!r} has no class labels", hint="publish without --labels")
        return None
    if path is None:
        if manifest.labels is None:
            return None
        return clean_labels(manifest.labels, f"{export_dir / MANIFEST_NAME}: field 'labels'")[0]
    try:
        lines = [line.strip() for line in Path(path).read_text().splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishError(f"{path}: cannot read labels ({getattr(exc, 'strerror', None) or exc})") from None
    labels = [line for line in lines if line]
    if not labels:
        raise PublishError(f"{path}: no labels in file", hint="one label per line")
    return labels


def _check_labels(art: Artifact, labels: list[str] | None) -> None:
    if not labels:
        return
    classes = art.io.outputs[0].shape[-1] if art.io.outputs and art.io.outputs[0].shape else None
    if isinstance(classes, int) and classes != len(labels):
        raise PublishError(
            f"{len(labels)} labels for output {art.io.outputs[0].name!r} of {classes} classes",
            hint="give one label per class, in class-index order",
        )


def _stage(staged: _Staging, export_dir: Path, manifest: Manifest, art: Artifact, model_name: str) -> PublishedModel:
    """Write one model's version folder and model-level files into the plan's staging folder (verified against
    the manifest) and add the renames that install them to the plan. Nothing in the repository changes here."""
    repo, options, labels = staged.repo, staged.options, staged.labels
    model_dir = repo / model_name
    number = repository.choose_version(model_dir, staged.version)
    config = build_config(
        model_name,
        art,
        options,
        preprocess=manifest.preprocess,
        labels=labels,
        export_info={
            "export": manifest.name,
            "task": manifest.task,
            "artifact": art.name,
            "sha256": art.sha256,
            "checkpoint_sha256": manifest.source.sha256,
            "arch": manifest.source.arch,
            "version": number,
            "tool_version": __version__,
        },
    )
    _check_compatible(model_dir, config, options)

    def files(version_dir: Path) -> None:
        version_dir.mkdir(parents=True)
        _copy_verified(export_dir / art.file, version_dir / SERVED_FILES[art.format], art)
        for extra in _external_data(export_dir, art):
            shutil.copy2(extra, version_dir / extra.name)
        record = dataclasses.replace(manifest, artifacts=[art], labels=labels)
        record_dict = record.to_dict() | {
            "published": {"model": model_name, "version": number, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        }
        (version_dir / MANIFEST_FILE).write_text(json.dumps(record_dict, indent=2) + "\n")

    model_files: dict[str, str | bytes] = {CONFIG_FILE: to_text(config)}
    if labels:
        model_files[LABELS_FILE] = "\n".join(labels) + "\n"
    if manifest.preprocess is not None:
        model_files[PREPROCESS_FILE] = json.dumps(manifest.preprocess.to_dict(), indent=2) + "\n"
    path = _install(staged.plan, repo, model_name, number, files, model_files)
    return PublishedModel(model_name, art.name, number, path, model_dir / CONFIG_FILE, art.sha256)


def _stage_pipeline(staged: _Staging, pipe: PipelinePlan) -> list[PublishedModel]:
    """Stage `<name>_preprocess` and the ensemble `<name>_pipeline` (serve.ensemble) into the plan."""
    plan, repo, options, version, labels = staged.plan, staged.repo, staged.options, staged.version, staged.labels
    published = []
    preprocess_number = repository.choose_version(repo / pipe.preprocess_name, version)
    warmup = {f"{WARMUP_DIR}/{IMAGE}": serialized_bytes([warmup_image()])}
    config = to_text(preprocess_config(pipe, options))
    path = _install(
        plan,
        repo,
        pipe.preprocess_name,
        preprocess_number,
        lambda version_dir: stage_preprocess_files(pipe, version_dir),  # model.py, spec, modelship's code
        {CONFIG_FILE: config, **warmup},
    )
    published.append(
        PublishedModel(
            pipe.preprocess_name, "preprocess", preprocess_number, path, _config(repo, pipe.preprocess_name), ""
        )
    )
    pipeline_number = repository.choose_version(repo / pipe.pipeline_name, version)
    files: dict[str, str | bytes] = {CONFIG_FILE: to_text(pipeline_config(pipe, options, labels))}
    if labels:
        files[LABELS_FILE] = "\n".join(labels) + "\n"
    record = {
        "pipeline": pipe.pipeline_name,
        "steps": [pipe.preprocess_name, pipe.model_name],
        "version": pipeline_number,
    }

    def version_files(version_dir: Path) -> None:  # an ensemble has no files; a record keeps the folder in S3 too
        version_dir.mkdir(parents=True)
        (version_dir / MANIFEST_FILE).write_text(json.dumps(record, indent=2) + "\n")

    path = _install(plan, repo, pipe.pipeline_name, pipeline_number, version_files, files)
    config_path = _config(repo, pipe.pipeline_name)
    published.append(
        PublishedModel(pipe.pipeline_name, "pipeline", pipeline_number, path, config_path, pipe.artifact.sha256)
    )
    return published


def _config(repo: Path, model_name: str) -> Path:
    return repo / model_name / CONFIG_FILE


def _install(
    plan: repository.Plan,
    repo: Path,
    model_name: str,
    number: int,
    version_files: Callable[[Path], None],
    model_files: dict[str, str | bytes],
) -> Path:
    """Stage one model into the plan's staging folder (`version_files(version_dir)` writes the version folder,
    `model_files` the model-level files by relative path) and add the renames that install it: a new model
    appears whole; an existing one gets the new version folder and its model-level files replaced. Nothing in
    `repo` changes here; returns the version folder it will have."""
    model_dir = repo / model_name
    staged = plan.folder / model_name
    version_dir = staged / str(number)
    try:
        version_files(version_dir)
        for relative, content in model_files.items():
            target = staged / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content if isinstance(content, bytes) else content.encode())
    except OSError as exc:
        hint = "free space on the repository's filesystem, or publish elsewhere (--repo)"
        raise os_failure(PublishError, exc, f"{plan.folder}: cannot stage {model_name}", hint) from None
    parse_config(str(model_files[CONFIG_FILE]), str(model_dir / CONFIG_FILE))
    if not model_dir.exists():
        plan.new(staged, model_dir)  # a new model appears whole, config and version together
    else:
        plan.new(version_dir, model_dir / str(number))
        for relative in model_files:
            folder = Path(relative).parts[0]
            if folder != relative and not (model_dir / folder).exists():
                if not any(c.target == str(model_dir / folder) for c in plan.changes):
                    plan.new(staged / folder, model_dir / folder)  # a model-level folder new to this model
            else:
                plan.replace(staged / relative, model_dir / relative)
        for stale in {LABELS_FILE, PREPROCESS_FILE} - set(model_files):
            if (model_dir / stale).exists():
                plan.remove(model_dir / stale)
    return model_dir / str(number)


def _check_compatible(model_dir: Path, config: Any, options: ServingOptions) -> None:
    """Refuse a new version whose tensors differ from the served ones while several versions are served."""
    existing = model_dir / CONFIG_FILE
    if options.keep_versions == 1 or not existing.is_file() or not repository.versions(model_dir):
        return
    old = parse_config(existing.read_text(), str(existing))
    if (list(old.input), list(old.output), old.max_batch_size) != (
        list(config.input),
        list(config.output),
        config.max_batch_size,
    ):
        raise PublishError(
            f"{model_dir.name}: inputs/outputs differ from the versions already served together with this one",
            hint="publish under a new --name, or serve only the latest version (--keep-versions 1)",
        )


def _copy_verified(source: Path, target: Path, art: Artifact) -> None:
    """Copy `source` to `target`, hashing as it goes; PublishError unless the sha256 matches the manifest."""
    if not source.is_file():
        raise PublishError(f"{source}: artifact {art.name!r} file is missing", hint="re-run export-model")
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            dst.write(chunk)
    if digest.hexdigest() != art.sha256:
        raise PublishError(
            f"{source}: sha256 {digest.hexdigest()[:12]}… does not match the manifest's {art.sha256[:12]}…",
            hint="the file changed after export; re-run export-model",
        )


def _external_data(export_dir: Path, art: Artifact) -> list[Path]:
    """ONNX external-data files stored beside the graph (`model.onnx.data`)."""
    if art.format != "onnx":
        return []
    return [p for p in [export_dir / f"{art.file}.data"] if p.is_file()]


def publish_to(repo: str | Path, export_dir: Path, options: PublishOptions) -> PublishResult:
    """Publish into a local folder (`publish_export`) or an s3:// location (serve.s3_publish)."""
    if is_object_store(repo):
        from modelship.serve.s3_publish import publish_to_s3

        return publish_to_s3(export_dir, str(repo), options)
    return publish_export(export_dir, Path(repo), **options.kwargs())
