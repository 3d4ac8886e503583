"""Server-side preprocessing: `<name>_preprocess` (a Python-backend model running modelship's own preprocessing on
encoded images) and `<name>_pipeline` (an ensemble: preprocess -> the artifact's model), so any client (curl, a
Java service, a browser upload) sends image bytes and gets the model's outputs, with no preprocessing of its own.

    <repo>/<name>_preprocess/config.pbtxt       backend "python"; IMAGE (TYPE_STRING) -> PIXELS (the input tensor)
    <repo>/<name>_preprocess/warmup/IMAGE       one real encoded image, for model_warmup
    <repo>/<name>_preprocess/<N>/model.py       serve/python_models/preprocess.py
    <repo>/<name>_preprocess/<N>/preprocess.json, modelship/...   the spec and the preprocessing code it runs
    <repo>/<name>_postprocess/                  segmentation: SCORES + SIZE -> MASK (the class mask at the
                                                photo's own size), serve/python_models/postprocess.py; detection
                                                with a resize: BOXES + SCALE -> BOXES (in the photo's pixels),
                                                serve/python_models/box_postprocess.py
    <repo>/<name>_pipeline/config.pbtxt         platform "ensemble"; IMAGE -> the artifact's outputs, own names
                                                (and MASK for a segmenter)
    <repo>/<name>_pipeline/labels.txt           so the classification extension works on the pipeline
    <repo>/<name>_pipeline/<N>/modelship.json   what it chains (an ensemble has no files; this keeps the folder)

Stock Triton images have numpy but not Pillow in the Python backend: `serve.stock_image` says what an operator adds.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from modelship.contract.errors import PublishError
from modelship.contract.iospec import TensorSpec
from modelship.contract.manifest import DEFAULT_TASK, Artifact
from modelship.contract.preprocessing import Layout, PreprocessSpec
from modelship.postprocess import mask_dtype
from modelship.serve.ensemble import PIPELINE_SUFFIX, ensemble_config, on_cpu
from modelship.serve.triton_config import (
    ServingOptions,
    dims,
    triton_dtype,
    triton_names,
)
from modelship.serve.vendoring import stage_python_model

PREPROCESS_SUFFIX = "_preprocess"
BOX_OUTPUT = "boxes"  # the detection interface's boxes (checkpoint.families.torchvision_detector)
POSTPROCESS_SUFFIX = "_postprocess"
IMAGE = "IMAGE"  # the pipeline's input: encoded image bytes, one per batch row
PIXELS = "PIXELS"  # the preprocess model's output: the artifact's image input
SIZE = "SIZE"  # the preprocess model's second output, for a postprocess step: each photo's (height, width)
SCORES = "SCORES"  # the postprocess model's input: the artifact's first output
MASK = "MASK"  # the postprocess model's (and a segmentation pipeline's) output: class indices per photo pixel
SCALE = "SCALE"  # the preprocess model's output for a box postprocess: photo size / resized size, [x, y, x, y]
BOXES = "BOXES"  # the box postprocess model's input and output: a detector's boxes
WARMUP_DIR = "warmup"


@dataclass(frozen=True)
class PipelinePlan:
    """What the pipeline of one artifact needs: its names, the image input it feeds and the spec it applies."""

    preprocess_name: str
    pipeline_name: str
    model_name: str  # the artifact's Triton model
    artifact: Artifact
    image: TensorSpec
    spec: PreprocessSpec
    postprocess_name: str | None = None  # the last step: a segmenter's class mask, or boxes back on the photo
    rescale_boxes: bool = False  # the postprocess puts a detector's boxes back on the photo (its input was resized)

    @property
    def mask(self) -> bool:
        return self.postprocess_name is not None and not self.rescale_boxes

    @property
    def batched(self) -> bool:
        """False for an artifact that takes one image at a time (a detector's ONNX graph): the whole pipeline then
        takes one image per request, with no batch axis (Triton runs an ensemble's steps at one batching)."""
        return self.artifact.io.batched


def plan_pipeline(
    base: str,
    model_name: str,
    artifact: Artifact,
    spec: PreprocessSpec | None,
    *,
    mask: bool = False,
    rescale_boxes: bool = False,
) -> PipelinePlan:
    """The pipeline for `artifact` served as `model_name` (with `mask`, ending in the class mask of its first
    output; with `rescale_boxes`, in its boxes put back on the photo), or a PublishError saying why it cannot have
    one."""
    inputs = artifact.io.inputs
    if spec is None:
        raise PublishError(
            f"export {base!r} has no preprocessing spec: a pipeline needs one",
            hint="export from a checkpoint whose metadata holds 'preprocess', or pass --pipeline-artifact none",
        )
    if len(inputs) != 1 or len(inputs[0].shape) != 4 or not inputs[0].dtype.startswith("float"):
        raise PublishError(
            f"artifact {artifact.name!r} does not take one float image tensor: no pipeline for it",
            hint="pass --pipeline-artifact none",
        )
    if not artifact.io.batched and (artifact.io.max_rows != 1 or mask):
        raise PublishError(f"artifact {artifact.name!r} has no batch axis: no pipeline for it")
    scores = artifact.io.outputs[0] if artifact.io.outputs else None
    if mask and (scores is None or len(scores.shape) != 4 or not isinstance(scores.shape[1], int)):
        raise PublishError(
            f"artifact {artifact.name!r}: its first output is not [batch, classes, height, width] class scores",
            hint="export the segmenter's mask output first, or pass --pipeline-artifact none",
        )
    if rescale_boxes and BOX_OUTPUT not in {t.name for t in artifact.io.outputs}:
        raise PublishError(f"artifact {artifact.name!r} has no {BOX_OUTPUT!r} output to put back on the photo")
    postprocess = base + POSTPROCESS_SUFFIX if mask or rescale_boxes else None
    names = (base + PREPROCESS_SUFFIX, base + PIPELINE_SUFFIX)
    return PipelinePlan(
        *names, model_name, artifact, inputs[0], spec, postprocess_name=postprocess, rescale_boxes=rescale_boxes
    )


def preprocess_config(plan: PipelinePlan, options: ServingOptions) -> mc.ModelConfig:
    """The Python-backend model: IMAGE bytes in, the artifact's image tensor out, batched and dynamically batched."""
    row = [] if plan.batched else [1]  # an unbatched pipeline's tensors hold their one row in their dims
    config = mc.ModelConfig(
        name=plan.preprocess_name, backend="python", max_batch_size=options.max_batch_size if plan.batched else 0
    )
    config.input.add(name=IMAGE, data_type=mc.TYPE_STRING, dims=[*row, 1])
    config.output.add(name=PIXELS, data_type=triton_dtype(plan.image), dims=[*row, *_pixel_dims(plan)])
    if plan.mask:
        config.output.add(name=SIZE, data_type=mc.TYPE_INT32, dims=[2])
    if plan.rescale_boxes:
        config.output.add(name=SCALE, data_type=mc.TYPE_FP32, dims=[*row, 4])
    on_cpu(config, options, batched=plan.batched)
    config.parameters["max_pixels"].string_value = str(options.max_image_pixels)
    warmup = config.model_warmup.add(name="modelship_jpeg", batch_size=1 if plan.batched else 0)
    image = mc.ModelWarmup.Input(data_type=mc.TYPE_STRING, dims=[*row, 1], input_data_file=IMAGE)
    warmup.inputs[IMAGE].CopyFrom(image)
    config.version_policy.latest.num_versions = 1
    return config


def postprocess_config(plan: PipelinePlan, options: ServingOptions) -> mc.ModelConfig:
    """The Python-backend model: SCORES (the artifact's first output) and SIZE in, the class MASK out (and the
    SCORES, passed through when a request asks for them)."""
    scores = plan.artifact.io.outputs[0]
    config = mc.ModelConfig(name=plan.postprocess_name, backend="python", max_batch_size=options.max_batch_size)
    config.input.add(name=SCORES, data_type=triton_dtype(scores), dims=dims(scores, batched=True))
    config.input.add(name=SIZE, data_type=mc.TYPE_INT32, dims=[2])
    config.output.add(name=MASK, data_type=_mask_type(plan), dims=[-1, -1])
    config.output.add(name=SCORES, data_type=triton_dtype(scores), dims=dims(scores, batched=True))
    on_cpu(config, options)
    config.version_policy.latest.num_versions = 1
    return config


def box_postprocess_config(plan: PipelinePlan, options: ServingOptions) -> mc.ModelConfig:
    """The Python-backend model: BOXES (the artifact's boxes) and SCALE in, BOXES in the photo's pixels out, batched
    as the artifact is."""
    boxes = next(t for t in plan.artifact.io.outputs if t.name == BOX_OUTPUT)
    row = [] if plan.batched else [1]
    config = mc.ModelConfig(
        name=plan.postprocess_name, backend="python", max_batch_size=options.max_batch_size if plan.batched else 0
    )
    box_dims = [*row, *dims(boxes, batched=True)]
    config.input.add(name=BOXES, data_type=triton_dtype(boxes), dims=box_dims)
    config.input.add(name=SCALE, data_type=mc.TYPE_FP32, dims=[*row, 4])
    config.output.add(name=BOXES, data_type=triton_dtype(boxes), dims=box_dims)
    on_cpu(config, options, batched=plan.batched)
    config.version_policy.latest.num_versions = 1
    return config


def _mask_type(plan: PipelinePlan) -> int:
    classes = cast(int, plan.artifact.io.outputs[0].shape[1])  # a static dim: pipeline_plan refuses a mask otherwise
    return mc.TYPE_UINT8 if mask_dtype(classes) == np.uint8 else mc.TYPE_INT32


def pipeline_config(
    plan: PipelinePlan, options: ServingOptions, labels: list[str] | None, task: str = DEFAULT_TASK
) -> mc.ModelConfig:
    """The ensemble IMAGE -> preprocess -> model (-> postprocess), with the model's outputs under the export's
    names (and MASK)."""
    names = triton_names(plan.artifact)
    config = ensemble_config(plan.pipeline_name, IMAGE, plan.artifact, options, labels, task, batched=plan.batched)
    if plan.mask:
        config.output.add(name=MASK, data_type=_mask_type(plan), dims=[-1, -1])
    steps = config.ensemble_scheduling
    first = steps.step.add(model_name=plan.preprocess_name, model_version=-1)
    first.input_map[IMAGE] = IMAGE
    first.output_map[PIXELS] = "pixels"
    second = steps.step.add(model_name=plan.model_name, model_version=-1)
    second.input_map[next(iter(names.inputs))] = "pixels"
    for served, own in names.outputs.items():
        second.output_map[served] = own
    if plan.mask:
        # the scores reach the client through the postprocess step: a tensor that is both an ensemble output and
        # a later step's input deadlocks Triton's ensemble when a request asks for the other outputs only
        scores = plan.artifact.io.outputs[0].name
        second.output_map[next(iter(names.outputs))] = "scores"
        first.output_map[SIZE] = "size"
        third = steps.step.add(model_name=plan.postprocess_name, model_version=-1)
        third.input_map[SCORES] = "scores"
        third.input_map[SIZE] = "size"
        third.output_map[MASK] = MASK
        third.output_map[SCORES] = scores
    if plan.rescale_boxes:
        served = next(name for name, own in names.outputs.items() if own == BOX_OUTPUT)
        second.output_map[served] = "model_boxes"
        first.output_map[SCALE] = "scale"
        third = steps.step.add(model_name=plan.postprocess_name, model_version=-1)
        third.input_map[BOXES] = "model_boxes"
        third.input_map[SCALE] = "scale"
        third.output_map[BOXES] = BOX_OUTPUT
    return config


def stage_preprocess_files(plan: PipelinePlan, version_dir: Path) -> None:
    """The preprocess model's version folder: model.py, its spec and the modelship modules it imports."""
    stage_python_model("preprocess", version_dir)
    plan.spec.write(version_dir / "preprocess.json")


def warmup_image() -> bytes:
    """A small real JPEG (a colour gradient), so warmup decodes, resizes and crops like a request."""
    from PIL import Image

    ramp = np.linspace(0, 255, 96, dtype=np.float32)
    pixels = np.stack(np.broadcast_arrays(ramp[:, None], ramp[None, :], 255 - ramp[:, None]), axis=-1)
    buffer = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def serialized_bytes(items: list[bytes]) -> bytes:
    """Triton's serialization of a TYPE_STRING tensor (each element: 4-byte little-endian length, then its bytes),
    the format of warmup files and of binary request data."""
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


def _pixel_dims(plan: PipelinePlan) -> list[int]:
    height, width = plan.spec.output_hw or (-1, -1)  # no crop: each image its own size
    return [3, height, width] if plan.spec.layout is Layout.NCHW else [height, width, 3]


def pipeline_output(artifact: Artifact) -> str:
    """The pipeline output that carries the labels (the classification extension ranks it): the artifact's first
    output, under the export's own name, as `pipeline_config` declares it."""
    return artifact.io.outputs[0].name


def curl_example(http_url: str, model: str, image: str, output: str, classes: int = 3) -> str:
    """A bash snippet that classifies `image` with `model` (a pipeline) using curl alone: Triton's binary tensor
    extension carries the file's bytes (after a 4-byte little-endian length, as TYPE_STRING data is serialized)
    behind a JSON header; the classification extension answers `score:index:label` for `output` (take it from the
    export: `pipeline_output(artifact)`)."""
    request = {
        "inputs": [{"name": IMAGE, "shape": [1, 1], "datatype": "BYTES", "parameters": {"binary_data_size": 0}}],
        "outputs": [{"name": output, "parameters": {"classification": classes}}],
    }
    header = json.dumps(request, separators=(",", ":")).replace(
        '"binary_data_size":0', "\"binary_data_size\":'$((SIZE + 4))'"
    )
    length = " ".join(f"$((SIZE >> {shift} & 255))" for shift in (0, 8, 16, 24))
    return (
        f"IMAGE={image}\n"
        'SIZE=$(stat -c %s "$IMAGE")\n'
        f"HEADER='{header}'\n"
        '{ printf %s "$HEADER"\n'
        f"  printf \"$(printf '\\\\%03o' {length})\"\n"
        '  cat "$IMAGE"\n'
        f'}} | curl -s --data-binary @- -H "Inference-Header-Content-Length: ${{#HEADER}}" \\\n'
        f"  {http_url}/v2/models/{model}/infer\n"
    )
