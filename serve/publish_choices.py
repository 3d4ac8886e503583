"""What one publish puts in the repository, decided from the export's manifest and the publish flags before
anything is written: the artifacts, their labels and the `_pipeline` ensemble (or the note why there is none)."""

from __future__ import annotations

from pathlib import Path

from modelship.contract.errors import PublishError
from modelship.contract.labels import clean_labels
from modelship.contract.manifest import EXPORT_MANIFEST, Artifact, Manifest
from modelship.contract.opsets import runtime_target
from modelship.contract.precisions import FP32, PRECISIONS
from modelship.export.formats import PLATFORMS
from modelship.serve import repository
from modelship.serve.ensemble import PIPELINE_SUFFIX
from modelship.serve.image_pipeline import POSTPROCESS_SUFFIX, PREPROCESS_SUFFIX, PipelinePlan, plan_pipeline
from modelship.serve.text_pipeline import TOKENIZE_SUFFIX, TextPipelinePlan, plan_text_pipeline
from modelship.tasks import Preprocessing, Task

AUTO_PIPELINE = "auto"  # a pipeline over the task's artifact (ONNX fp32) when one can be built, else a note why


def default_pipeline_artifact(chosen: list[Artifact], task: Task) -> str:
    """What a `_pipeline` serves when nobody said: the first of the task's formats that is published, and of its
    artifacts one whose precision serves first (INT8: it ships only when accurate and faster), else its fp32 one."""
    for artifact_format in task.pipeline_formats:
        of_format = [a for a in chosen if a.format == artifact_format]
        first = [a for a in of_format if a.precision in PRECISIONS and PRECISIONS[a.precision].serves_first]
        fp32 = [a for a in of_format if a.precision == FP32]
        if first or fp32:
            return (first or fp32)[0].name
    return task.pipeline_formats[0]  # not published: pipeline_plan says so


def pipeline_plan(
    manifest: Manifest,
    chosen: list[Artifact],
    model_names: dict[str, str],
    base: str,
    artifact: str | None,
    task: Task,
) -> tuple[PipelinePlan | TextPipelinePlan | None, str | None]:
    """The pipeline to publish (None when not wanted or, by default only, impossible) and the note saying why there
    is none; asked for explicitly, a pipeline that cannot be built is an error."""
    if artifact is None:
        return None, None
    explicit = artifact != AUTO_PIPELINE
    published = {a.name: a for a in chosen}
    if artifact == AUTO_PIPELINE:
        artifact = default_pipeline_artifact(chosen, task)
    try:
        if task.preprocessing is Preprocessing.NONE:
            raise PublishError(f"task {task.name!r} takes no preprocessing", hint="publish without --pipeline")
        if artifact not in published:
            raise PublishError(
                f"--pipeline-artifact {artifact}: that artifact is not being published",
                hint=f"publish it too (--artifact {artifact}), or choose one of {', '.join(published)}",
            )
        if task.preprocessing is Preprocessing.TEXT:
            for suffix in (TOKENIZE_SUFFIX, PIPELINE_SUFFIX):
                repository.check_model_name(base + suffix)
            return plan_text_pipeline(base, model_names[artifact], published[artifact], manifest.tokenizer), None
        spec = manifest.preprocess
        if task.pipeline_same_size and spec is not None and spec.crop:
            raise PublishError(
                f"a {task.name} pipeline answers in the photo's own pixels: its preprocessing must not crop",
                hint="export with a spec without a crop, or --pipeline-artifact none",
            )
        rescale = task.boxes_on_photo(spec)
        postprocess = (POSTPROCESS_SUFFIX,) if task.pipeline_mask or rescale else ()
        for suffix in (PREPROCESS_SUFFIX, PIPELINE_SUFFIX, *postprocess):
            repository.check_model_name(base + suffix)
        plan = plan_pipeline(
            base,
            model_names[artifact],
            published[artifact],
            manifest.preprocess,
            mask=task.pipeline_mask,
            rescale_boxes=rescale,
        )
        return plan, None
    except PublishError as exc:
        if explicit:
            raise
        return None, f"no {base}{PIPELINE_SUFFIX}: {exc.message}"


def choose_artifacts(manifest: Manifest, wanted: list[str] | None) -> list[Artifact]:
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


def publish_labels(manifest: Manifest, path: Path | None, export_dir: Path, task: Task) -> list[str] | None:
    """The labels to publish: the --labels file (one per line), else the manifest's, one line each; none for a
    task without labels."""
    if not task.labels:
        if path is not None:
            raise PublishError(f"--labels: task {task.name!r} has no class labels", hint="publish without --labels")
        return None
    if path is None:
        if manifest.labels is None:
            return None
        return clean_labels(manifest.labels, f"{export_dir / EXPORT_MANIFEST}: field 'labels'")[0]
    try:
        lines = [line.strip() for line in Path(path).read_text().splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishError(f"{path}: cannot read labels ({getattr(exc, 'strerror', None) or exc})") from None
    labels = [line for line in lines if line]
    if not labels:
        raise PublishError(f"{path}: no labels in file", hint="one label per line")
    return labels


def check_labels(art: Artifact, labels: list[str] | None) -> None:
    if not labels:
        return
    classes = art.io.outputs[0].shape[-1] if art.io.outputs and art.io.outputs[0].shape else None
    if isinstance(classes, int) and classes != len(labels):
        raise PublishError(
            f"{len(labels)} labels for output {art.io.outputs[0].name!r} of {classes} classes",
            hint="give one label per class, in class-index order",
        )
