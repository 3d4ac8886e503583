"""What `check_export` judges every candidate against: the reference the user chose (`ReferenceChoice`: the
checkpoint rebuilt in eager PyTorch, its sha256 checked first, or the golden data saved at export), built once into
a `Reference` (its results on the input sets: seeded random batches, and with images the image files through the
training preprocessing)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from modelship.contract.errors import ParityError, UsageError
from modelship.contract.manifest import EXPORT_MANIFEST, Artifact, Manifest
from modelship.contract.parity_report import ParityReport
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.parity import RunResults, ToleranceConfig
from modelship.parity.engine import judge_runner, reference_results
from modelship.parity.image_inputs import IMAGES, PreprocessingDifference
from modelship.parity.runner_protocol import Runner, SetKind
from modelship.parity.text_sets import TEXTS
from modelship.tasks import get_task


class Against(StrEnum):
    """The reference: the checkpoint rebuilt in eager PyTorch, or the golden data saved at export."""

    CHECKPOINT = "checkpoint"
    GOLDEN = "golden"


@dataclass(frozen=True)
class ReferenceChoice:
    """What the artifacts are compared with: the checkpoint rebuilt in eager PyTorch (`checkpoint`: where it is
    now, `arch`: the architecture to rebuild it with, else the manifest's) at seeded `batch_sizes`, plus the image
    files of `images`; or the golden data saved at export."""

    against: Against = Against.CHECKPOINT
    checkpoint: Path | None = None
    arch: str | None = None
    batch_sizes: tuple[int, ...] = (1, 8)
    seed: int = 0
    images: Path | None = None
    preprocess: str | None = None  # the serving spec for `images` (a JSON file or key=value pairs), not the manifest's
    texts: Path | None = None  # a file of texts, one per line, for a text model

    def __post_init__(self) -> None:
        if self.against not in tuple(Against):
            raise UsageError(f"unknown reference {self.against!r}", hint=f"use one of {', '.join(Against)}")
        object.__setattr__(self, "against", Against(self.against))
        for flag, value in (("--images", self.images), ("--texts", self.texts)):
            if value is not None and self.against is Against.GOLDEN:
                raise UsageError(
                    f"{flag} needs --against checkpoint", hint="golden data holds outputs for its own inputs"
                )


@dataclass
class Reference:
    """What every candidate is judged against: the reference's results on the input sets (eager outputs computed
    once, or the golden data), the sets and their labels, with images how far apart both preprocessing pipelines'
    model inputs are, and the eager model (None against golden)."""

    results: RunResults
    sets: list[Tensors]
    labels: list[str]
    images: PreprocessingDifference | None = None
    model: Any = None

    @property
    def name(self) -> str:
        return self.results.runner

    def judge(self, runner: Runner, tolerance: ToleranceConfig, kinds: dict[str, str]) -> ParityReport:
        """`runner` run on the sets it takes (image files only, for a served pipeline) and judged; whatever it
        raises while running is its failed report (`run_sets`)."""
        takes = runner.takes
        chosen = [i for i, inputs in enumerate(self.sets) if takes is SetKind.TENSORS or takes in inputs]
        if not chosen:
            flag = "--texts FILE" if takes is SetKind.TEXTS else "--images DIR"
            raise UsageError(f"{runner.name} takes {'texts' if takes is SetKind.TEXTS else 'encoded images'}",
                             hint=f"compare it with {flag}")  # fmt: skip
        sets, labels = [self.sets[i] for i in chosen], [self.labels[i] for i in chosen]
        expected = RunResults(self.name, [self.results.outputs[i] for i in chosen], self.results.seconds)
        return judge_runner(expected, runner, sets, labels, tolerance, kinds)


def build_reference(
    manifest: Manifest, folder: Path, choice: ReferenceChoice, serving: tuple[PreprocessSpec, str] | None
) -> Reference:
    """The golden data, or the checkpoint rebuilt in eager PyTorch run on seeded sets (and, with images, on the
    image files through the training preprocessing)."""
    from modelship.parity import input_sets, load_golden, reference_runner
    from modelship.parity.inputs import image_sizes

    if choice.against is Against.GOLDEN:
        if not manifest.golden:
            raise ParityError(f"export {manifest.name!r} has no golden data", hint="use --against checkpoint")
        inputs, outputs = load_golden(folder / manifest.golden)
        labels = [f"golden set {i}" for i in range(len(inputs))]
        return Reference(RunResults("golden", outputs, 0.0), inputs, labels)
    loaded, checkpoint = _rebuild(manifest, folder, choice.checkpoint, choice.arch)
    eager: Runner = reference_runner(loaded.model, manifest.io, name="eager")
    sizes = image_sizes(manifest.io, manifest.preprocess)
    sets = input_sets(manifest.io, choice.batch_sizes, seed=choice.seed, sizes=sizes)
    labels = [f"batch {b}" for b in choice.batch_sizes]
    images = None
    if serving is not None and choice.images is not None:
        from modelship.parity import image_inputs
        from modelship.preprocess import image_files

        image = image_inputs.image_input(manifest.io)
        files = image_files(choice.images)
        transform = image_inputs.training_transform(loaded.model, loaded.arch, loaded.preprocess, str(checkpoint))
        on_photo = image_inputs.boxes_on_photo(get_task(manifest.task), serving[0])
        training = image_inputs.training_pipeline(eager, transform, image.name, boxes_on_photo=on_photo)
        images = image_inputs.preprocessing_difference(
            training.preprocess,
            image_inputs.serving_preprocess(serving[0], image.dtype),
            files,
            reference=transform.source,
            candidates=f"preprocess/ with {serving[1]}",
        )
        eager = training
        each_alone = get_task(manifest.task).pipeline_mask
        for label, image_set in image_inputs.image_sets(files, serving[0], choice.images, each_alone=each_alone):
            sets.append(image_set)
            labels.append(label)
    if choice.texts is not None:
        from modelship.parity.text_sets import TextPipeline, read_text_file, text_sets, transformers_tokenize

        if loaded.tokenizer is None or manifest.tokenizer is None:
            raise UsageError(f"--texts: export {manifest.name!r} is not a text model with its tokenizer")
        eager = TextPipeline(eager, transformers_tokenize(loaded.tokenizer.path.parent, manifest.tokenizer))
        for label, text_set in text_sets(read_text_file(choice.texts)):
            sets.append(text_set)
            labels.append(label)
    return Reference(reference_results(eager, sets), sets, labels, images, loaded.model)


def own_reference(reference: Reference, artifact: Artifact, folder: Path, manifest: Manifest) -> Reference:
    """What `artifact` is judged against: for one verified on inputs of its own (an INT8 variant's golden file:
    real inputs held back from calibration, not the seeded random ones its precision is not judged on), those
    inputs with the reference's outputs for them (eager's against the checkpoint, the saved ones against golden),
    plus this check's image and text sets; `reference` itself for every other artifact."""
    golden = getattr(artifact.details, "golden", "")
    if not golden:
        return reference
    from modelship.parity import load_golden, reference_runner

    inputs, outputs = load_golden(folder / golden)
    if reference.model is not None:
        outputs = reference_results(reference_runner(reference.model, manifest.io, name="eager"), inputs).outputs
    labels = [f"held-back set {i + 1}" for i in range(len(inputs))]
    extra = [i for i, inputs_ in enumerate(reference.sets) if IMAGES in inputs_ or TEXTS in inputs_]
    return Reference(
        RunResults(reference.name, outputs + [reference.results.outputs[i] for i in extra], reference.results.seconds),
        inputs + [reference.sets[i] for i in extra],
        labels + [reference.labels[i] for i in extra],
        reference.images,
        reference.model,
    )


def _rebuild(manifest: Manifest, folder: Path, checkpoint: Path | None, arch: str | None) -> tuple[Any, Path]:
    """The LoadedModel rebuilt from the manifest's source (its sha256 checked before anything is read from it),
    and the checkpoint path it came from. The manifest is a data file: its arch may only name a registry model."""
    from modelship.checkpoint import LoadOptions, load_model
    from modelship.checkpoint.arch import check_data_arch

    source = manifest.source
    if arch is None:
        check_data_arch(source.arch, source.arch_kwargs, file=str(folder / EXPORT_MANIFEST), field="source.arch")
    path = checkpoint or _checkpoint_path(source.checkpoint, folder)
    options = LoadOptions(
        checkpoint=path,
        arch=arch or source.arch,
        arch_kwargs=dict(source.arch_kwargs or {}),
        keep_aux=any(spec.name == "aux" for spec in manifest.io.outputs),  # exported with --keep-aux
        expected_sha256=source.sha256 or None,
    )
    return load_model(options), path


def _checkpoint_path(recorded: str, folder: Path) -> Path:
    """The recorded path as given at export time (relative to the current folder), else relative to the export."""
    path = Path(recorded)
    for candidate in (path, folder / path):
        if candidate.is_file() or candidate.is_dir():  # a folder: a Hugging Face checkpoint
            return candidate
    raise ParityError(
        f"checkpoint {recorded} recorded in {folder / EXPORT_MANIFEST} not found",
        hint="pass it with --checkpoint, or use --against golden",
    )
