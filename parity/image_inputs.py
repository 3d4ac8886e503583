"""End-to-end image parity: the training pipeline against the serving pipeline, on the same image files.

Comparing artifacts on a batch that one preprocessing produced for both sides can never catch a wrong
preprocessing spec. Here each side decodes and preprocesses the files itself:

- reference (training): Pillow decodes each file, the transform the model was trained with (timm's
  `create_transform`, torchvision's weights `transforms()`, or the checkpoint's own preprocessing spec through
  `preprocess.to_torchvision`) makes a tensor in torch, the eager model runs it;
- candidate (serving): `preprocess/` (numpy + Pillow) applies the spec published beside the model (the
  manifest's), the artifact (ONNX Runtime, TorchScript or a served Triton model) runs it.

Both are runners whose input sets hold `{"images": array of file paths}`; other input sets pass through to the
wrapped runner unchanged, so random and image sets go through the one engine (`compare_runners`) in one report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from modelship.contract.box_result import DETECTION_OUTPUTS
from modelship.contract.errors import UsageError
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.contract.json_object import JsonObject
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.parity.batching import batch_limit
from modelship.parity.runner_protocol import BaseRunner, Runner, SetKind

if TYPE_CHECKING:  # the families import torch; this module stays light (the served runner imports it)
    from modelship.checkpoint.families import ReferenceTransform as TrainingTransform
    from modelship.tasks import Task

IMAGES = SetKind.IMAGES.value  # the input-set key holding image file paths
BOXES = DETECTION_OUTPUTS[0]  # a detector's boxes, put back on the photo where its preprocessing resizes
# Model inputs from the two pipelines count as the same below this (torch vs numpy float32 arithmetic differs by
# ~1e-7; one step of 8-bit pixel value after normalization is ~0.017).
PREPROCESS_ATOL = 1e-3
Preprocess = Callable[[Sequence[Path]], np.ndarray]


def image_set(paths: Sequence[str | Path]) -> Tensors:
    """An input set of image files: `{"images": object array of paths}` (its length is the batch size)."""
    return {IMAGES: np.array([str(p) for p in paths], dtype=object)}


def image_input(io: IOSpec) -> TensorSpec:
    """The model's image input: it must be the only input, floating point, (batch, C, H, W) or (batch, H, W, C)."""
    if len(io.inputs) != 1 or not io.inputs[0].dtype.startswith("float") or len(io.inputs[0].shape) != 4:
        found = ", ".join(f"{t.name}{list(t.shape)}:{t.dtype}" for t in io.inputs)
        raise UsageError(f"--images needs a model with exactly one float image input (batch, C, H, W); it has {found}")
    return io.inputs[0]


class ImagePipeline(BaseRunner):
    """A runner that turns an input set of image files into the model's image input with `preprocess`, then runs
    `runner`; input sets without image files go to `runner` as they are. Named like the runner it wraps.

    `boxes_on_photo`, for a detector whose preprocessing resizes: that preprocessing, with which its boxes are put
    back on each photo (`preprocess.image.box_scale`, as its served `_pipeline`'s box postprocess and transformers'
    `post_process_object_detection(target_sizes=...)` do)."""

    def __init__(
        self,
        runner: Runner,
        preprocess: Preprocess,
        input_name: str,
        *,
        describe: str = "",
        boxes_on_photo: PreprocessSpec | None = None,
    ) -> None:
        self.runner = runner
        self.preprocess = preprocess
        self.input_name = input_name
        self.name = runner.name
        self.describe = describe
        self.boxes_on_photo = boxes_on_photo

    @property
    def max_batch(self) -> int | None:
        """The wrapped runner's batch limit (the files are preprocessed chunk by chunk)."""
        return batch_limit(self.runner)

    def run(self, inputs: Tensors) -> Tensors:
        if IMAGES not in inputs:
            return self.runner.run(inputs)
        paths = [Path(p) for p in inputs[IMAGES]]
        batch = self.preprocess(paths)
        outputs = self.runner.run({self.input_name: batch})
        if self.boxes_on_photo is None or BOXES not in outputs:
            return outputs
        return outputs | {BOXES: boxes_on_photos(outputs[BOXES], paths, self.boxes_on_photo)}

    def close(self) -> None:
        self.runner.close()


def boxes_on_photo(task: Task, spec: PreprocessSpec) -> PreprocessSpec | None:
    """`spec` where `task`'s boxes are put back on the photo after it (`ImagePipeline`), else None."""
    return spec if task.boxes_on_photo(spec) else None


def boxes_on_photos(boxes: np.ndarray, paths: Sequence[Path], spec: PreprocessSpec) -> np.ndarray:
    """[batch, rows, 4] boxes (x1, y1, x2, y2) in the pixels of the images `spec` resized -> on each photo of
    `paths`, times `box_scale` as the served box postprocess multiplies them; padding rows (zeros) stay zeros."""
    from modelship.preprocess import load_image
    from modelship.preprocess.image import box_scale

    scales = np.stack([box_scale(photo.height, photo.width, spec) for photo in map(load_image, paths)])
    return (boxes * scales[:, None, :]).astype(boxes.dtype, copy=False)


def training_preprocess(transform: TrainingTransform) -> Preprocess:
    """Files -> batch the training way: each decoded by Pillow (`preprocess.load_image`: EXIF orientation applied,
    converted to RGB, as an image-folder loader does), through `transform` in torch, stacked."""

    def preprocess(paths: Sequence[Path]) -> np.ndarray:
        import torch

        from modelship.preprocess import load_image

        with torch.inference_mode():
            return torch.stack([transform.transform(load_image(p)) for p in paths]).numpy()

    return preprocess


def serving_preprocess(spec: Any, dtype: str) -> Preprocess:
    """Files -> batch the serving way: `preprocess.preprocess_images` with `spec` (a PreprocessSpec), cast to
    the model input's dtype."""
    from modelship.preprocess import preprocess_images

    def preprocess(paths: Sequence[Path]) -> np.ndarray:
        return preprocess_images(list(paths), spec).astype(dtype, copy=False)

    return preprocess


def training_pipeline(
    runner: Runner, transform: TrainingTransform, input_name: str, *, boxes_on_photo: PreprocessSpec | None = None
) -> ImagePipeline:
    """Reference side: `training_preprocess(transform)`, then `runner` (eager PyTorch)."""
    preprocess = training_preprocess(transform)
    return ImagePipeline(runner, preprocess, input_name, describe=transform.source, boxes_on_photo=boxes_on_photo)


def serving_pipeline(
    runner: Runner, spec: Any, input_spec: TensorSpec, *, source: str, boxes_on_photo: PreprocessSpec | None = None
) -> ImagePipeline:
    """Candidate side: `serving_preprocess(spec)`, then `runner` (an artifact or a served model)."""
    preprocess = serving_preprocess(spec, input_spec.dtype)
    describe = f"preprocess/ with {source}"
    return ImagePipeline(runner, preprocess, input_spec.name, describe=describe, boxes_on_photo=boxes_on_photo)


@dataclass(frozen=True)
class PreprocessingDifference:
    """How far the serving side's model input is from the training side's on the same image files: `matches` (same
    shape, max abs difference <= PREPROCESS_ATOL), the differences (None when the shapes differ), both shapes, and
    where each side's preprocessing came from. This is what tells a broken preprocessing spec apart from an
    artifact that is numerically off on real images."""

    reference: str
    candidates: str
    matches: bool
    max_abs: float | None
    mean_abs: float | None
    training_shape: list[int]
    serving_shape: list[int]

    def to_dict(self) -> JsonObject:
        return asdict(self)

    def diagnosis(self) -> str:
        """Why a candidate that failed on images failed, when it is the preprocessing."""
        if self.max_abs is None:
            found = f"shape {self.serving_shape}, the training transforms give {self.training_shape}"
        else:
            found = f"model inputs differ by up to {self.max_abs:.3g} (mean {self.mean_abs:.3g})"
        return (
            f"the serving preprocessing ({self.candidates}) does not reproduce the training transforms "
            f"({self.reference}): {found}; check mean/std, channel order, resize/crop, interpolation"
        )


def preprocessing_difference(
    training: Preprocess, serving: Preprocess, paths: Sequence[Path], *, reference: str = "", candidates: str = ""
) -> PreprocessingDifference:
    """Both sides' model inputs on `paths`, compared image by image (images of a spec without a crop have sizes of
    their own); `reference` and `candidates` say where each side's preprocessing came from."""
    sides = (reference, candidates)
    worst, total, count = 0.0, 0.0, 0
    for path in paths:
        expected, actual = training([path]), serving([path])
        if expected.shape != actual.shape:
            shapes = ([len(paths), *expected.shape[1:]], [len(paths), *actual.shape[1:]])
            return PreprocessingDifference(*sides, False, None, None, *shapes)
        diff = np.abs(expected.astype(np.float64) - actual.astype(np.float64))
        worst, total, count = max(worst, float(diff.max())), total + float(diff.sum()), count + diff.size
    shape = [len(paths), *expected.shape[1:]] if paths else []
    return PreprocessingDifference(*sides, worst <= PREPROCESS_ATOL, worst, total / max(count, 1), shape, shape)


def image_sets(
    files: Sequence[Path], spec: PreprocessSpec, folder: Path | str, *, each_alone: bool = False
) -> list[tuple[str, Tensors]]:
    """The image input sets and their labels: the first image alone, then all of them (a second batch size); for a
    spec without a fixed output size (no crop: a segmenter's), or `each_alone` (a pipeline that answers at each
    photo's own size, which takes one size per request), up to three images, each a set of its own."""
    if spec.output_hw is None or each_alone:
        return [(f"image {path.name}", image_set([path])) for path in files[:3]]
    sets = [(f"image {files[0].name}", image_set(files[:1]))]
    if len(files) > 1:
        sets.append((f"{len(files)} images from {folder}", image_set(files)))
    return sets


def training_transform(model: Any, arch: str, preprocess: PreprocessSpec | None, checkpoint: str) -> TrainingTransform:
    """The transform a checkpoint's model was trained with, first found of:

    1. the checkpoint's own preprocessing spec (`preprocess`, from the checkpoint's metadata or its sidecar), as
       the torchvision `Compose` `preprocess.to_torchvision` builds;
    2. its model family's own (`checkpoint.families`): timm's `create_transform(**resolve_data_config(model))`,
       torchvision's `get_model_weights(arch).DEFAULT.transforms()`, a Hugging Face folder's image processor.

    A UsageError when none applies (a custom architecture without a spec in its metadata).
    """
    from modelship.checkpoint.families import ReferenceTransform, family_of
    from modelship.preprocess import to_torchvision

    if preprocess is not None:
        return ReferenceTransform(to_torchvision(preprocess), f"the checkpoint's preprocess metadata ({checkpoint})")
    own = family_of(arch).reference_transform(model, arch, Path(checkpoint))
    if own is not None:
        return own
    raise UsageError(
        f"{checkpoint}: no training preprocessing to compare --images against (arch {arch!r} is neither timm nor "
        "a torchvision model with weights, and the checkpoint's metadata has no 'preprocess')",
        hint=f"store the spec the model was trained with as 'preprocess' in the checkpoint or its sidecar "
        f"{checkpoint}.json (see docs/checkpoints.md)",
    )
