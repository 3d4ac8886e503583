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
from dataclasses import dataclass, field
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from modelship import __version__
from modelship.contract.errors import PublishError
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import Artifact, Manifest
from modelship.export.formats import SERVED_FILES
from modelship.serve import repository
from modelship.serve.image_pipeline import (
    IMAGE,
    WARMUP_DIR,
    PipelinePlan,
    box_postprocess_config,
    pipeline_config,
    postprocess_config,
    preprocess_config,
    serialized_bytes,
    stage_preprocess_files,
    warmup_image,
)
from modelship.serve.model_staging import CONFIG_FILE, PREPROCESS_FILE, check_compatible, config_path, install
from modelship.serve.publish_choices import (
    AUTO_PIPELINE,
    check_labels,
    choose_artifacts,
    pipeline_plan,
    publish_labels,
)
from modelship.serve.text_pipeline import TextPipelinePlan, stage_tokenize_files, text_pipeline_config, tokenize_config
from modelship.serve.triton_config import (
    LABELS_FILE,
    ExportRecord,
    ServingOptions,
    build_config,
    to_text,
)
from modelship.serve.vendoring import stage_python_model
from modelship.tasks import get_task

DEFAULT_REPO = Path("model_repo")
PUBLISHED_RECORD = "modelship.json"  # a published version folder's record (an export folder holds manifest.json)
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

    def to_dict(self) -> JsonObject:
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
    the ensemble `<name>_pipeline` over the `pipeline` artifact (serve.publish_choices): "auto" picks the ONNX fp32 one
    and only notes why when none can be built; an artifact name must work; None writes no pipeline.

    All or nothing: the files beside the artifacts (the tokenizer) are sha256-verified first, every artifact is
    copied and sha256-verified into a staging folder and every config is built before the repository changes;
    then one journaled commit makes them all visible (serve.repository).
    """
    export_dir, repo = Path(export_dir), Path(repo or DEFAULT_REPO)
    repository.check_version(version)
    manifest = Manifest.read(export_dir)
    manifest.refuse_changed_files(export_dir, PublishError)
    base = repository.check_model_name(manifest.name if name is None else name)
    chosen = choose_artifacts(manifest, artifacts)
    task = get_task(manifest.task)
    label_list = publish_labels(manifest, labels, export_dir, task)
    options = serving or ServingOptions()
    result = PublishResult(repo=repo.resolve())
    model_names = {art.name: repository.check_model_name(served_name(base, art.name)) for art in chosen}
    for art in chosen if task.label_output else ():  # class scores first: one label per class (boxes have none)
        check_labels(art, label_list)
    pipe, note = pipeline_plan(manifest, chosen, model_names, base, pipeline, task)
    result.notes += [note] if note else []
    with repository.locked(repo):
        changes = repository.StagedChanges(repository.staging_dir(repo))
        staged = _Staging(changes, repo, options, version, label_list, task.name)
        for art in chosen:
            result.models.append(_stage(staged, export_dir, manifest, art, model_names[art.name]))
        if isinstance(pipe, TextPipelinePlan):
            result.models += _stage_text_pipeline(staged, pipe, export_dir)
        elif pipe is not None:
            result.models += _stage_pipeline(staged, pipe)
        repository.commit(staged.plan)
    return result


@dataclass(frozen=True)
class _Staging:
    """What every model staged by one publish shares: the commit plan, the repository, how models are served,
    the version asked for and the labels."""

    plan: repository.StagedChanges
    repo: Path
    options: ServingOptions
    version: int | None
    labels: list[str] | None
    task: str


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
        export_info=ExportRecord(
            export=manifest.name,
            task=manifest.task,
            artifact=art.name,
            sha256=art.sha256,
            checkpoint_sha256=manifest.source.sha256,
            arch=manifest.source.arch,
            version=number,
            tool_version=__version__,
        ),
    )
    check_compatible(model_dir, config, options)

    def files(version_dir: Path) -> None:
        version_dir.mkdir(parents=True)
        _copy_verified(export_dir / art.file, version_dir / SERVED_FILES[art.format], art)
        for extra in _external_data(export_dir, art):
            shutil.copy2(extra, version_dir / extra.name)
        record = dataclasses.replace(manifest, artifacts=[art], labels=labels)
        record_dict = record.to_dict() | {
            "published": {"model": model_name, "version": number, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        }
        (version_dir / PUBLISHED_RECORD).write_text(json.dumps(record_dict, indent=2) + "\n")

    model_files: dict[str, str | bytes] = {CONFIG_FILE: to_text(config)}
    if labels:
        model_files[LABELS_FILE] = "\n".join(labels) + "\n"
    if manifest.preprocess is not None:
        model_files[PREPROCESS_FILE] = json.dumps(manifest.preprocess.to_dict(), indent=2) + "\n"
    path = install(staged.plan, repo, model_name, number, files, model_files)
    return PublishedModel(model_name, art.name, number, path, model_dir / CONFIG_FILE, art.sha256)


def _stage_pipeline(staged: _Staging, pipe: PipelinePlan) -> list[PublishedModel]:
    """Stage `<name>_preprocess` and the ensemble `<name>_pipeline` (serve.image_pipeline) into the plan."""
    plan, repo, options, version, labels = staged.plan, staged.repo, staged.options, staged.version, staged.labels
    published = []
    preprocess_number = repository.choose_version(repo / pipe.preprocess_name, version)
    warmup = {f"{WARMUP_DIR}/{IMAGE}": serialized_bytes([warmup_image()])}
    config = to_text(preprocess_config(pipe, options))
    path = install(
        plan,
        repo,
        pipe.preprocess_name,
        preprocess_number,
        lambda version_dir: stage_preprocess_files(pipe, version_dir),  # model.py, spec, modelship's code
        {CONFIG_FILE: config, **warmup},
    )
    published.append(
        PublishedModel(
            pipe.preprocess_name, "preprocess", preprocess_number, path, config_path(repo, pipe.preprocess_name), ""
        )
    )
    if pipe.postprocess_name is not None:
        published.append(_stage_postprocess(staged, pipe, pipe.postprocess_name))
    config = pipeline_config(pipe, options, labels, staged.task)
    steps = [pipe.preprocess_name, pipe.model_name] + ([pipe.postprocess_name] if pipe.postprocess_name else [])
    published.append(_stage_ensemble(staged, pipe.pipeline_name, config, steps, pipe.artifact.sha256))
    return published


def _stage_text_pipeline(staged: _Staging, pipe: TextPipelinePlan, export_dir: Path) -> list[PublishedModel]:
    """Stage `<name>_tokenize` and the ensemble `<name>_pipeline` (serve.text_pipeline) into the plan."""
    number = repository.choose_version(staged.repo / pipe.tokenize_name, staged.version)
    path = install(
        staged.plan,
        staged.repo,
        pipe.tokenize_name,
        number,
        lambda version_dir: stage_tokenize_files(pipe, export_dir, version_dir),
        {CONFIG_FILE: to_text(tokenize_config(pipe, staged.options))},
    )
    tokenize = PublishedModel(
        pipe.tokenize_name, "tokenize", number, path, config_path(staged.repo, pipe.tokenize_name), ""
    )
    config = text_pipeline_config(pipe, staged.options, staged.labels, staged.task)
    steps = [pipe.tokenize_name, pipe.model_name]
    return [tokenize, _stage_ensemble(staged, pipe.pipeline_name, config, steps, pipe.artifact.sha256)]


def _stage_ensemble(
    staged: _Staging, name: str, config: mc.ModelConfig, steps: list[str], sha256: str
) -> PublishedModel:
    """Stage one ensemble (its config, labels, and a version folder holding the record of what it chains)."""
    number = repository.choose_version(staged.repo / name, staged.version)
    files: dict[str, str | bytes] = {CONFIG_FILE: to_text(config)}
    if staged.labels:
        files[LABELS_FILE] = "\n".join(staged.labels) + "\n"
    record = {"pipeline": name, "steps": steps, "version": number}

    def version_files(version_dir: Path) -> None:  # an ensemble has no files; a record keeps the folder in S3 too
        version_dir.mkdir(parents=True)
        (version_dir / PUBLISHED_RECORD).write_text(json.dumps(record, indent=2) + "\n")

    path = install(staged.plan, staged.repo, name, number, version_files, files)
    return PublishedModel(name, "pipeline", number, path, config_path(staged.repo, name), sha256)


def _stage_postprocess(staged: _Staging, pipe: PipelinePlan, name: str) -> PublishedModel:
    """Stage `<name>_postprocess` (a segmenter's class mask, or a detector's boxes put back on the photo) into the
    plan."""
    number = repository.choose_version(staged.repo / name, staged.version)
    build = box_postprocess_config if pipe.rescale_boxes else postprocess_config
    config = {CONFIG_FILE: to_text(build(pipe, staged.options))}

    def files(version_dir: Path) -> None:
        stage_python_model("box_postprocess" if pipe.rescale_boxes else "postprocess", version_dir)

    path = install(staged.plan, staged.repo, name, number, files, config)
    return PublishedModel(name, "postprocess", number, path, config_path(staged.repo, name), "")


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


def publish_with(export_dir: Path, repo: Path, options: PublishOptions) -> PublishResult:
    """`publish_export` with a PublishOptions value."""
    return publish_export(
        export_dir,
        repo,
        name=options.name,
        artifacts=list(options.artifacts) if options.artifacts else None,
        version=options.version,
        labels=options.labels,
        serving=options.serving,
        pipeline=options.pipeline,
    )
