"""Triton `config.pbtxt` for one exported artifact, built as tritonclient's `ModelConfig` protobuf.

One artifact -> one Triton model. What goes in, and why:
- `platform`: `onnxruntime_onnx` or `pytorch_libtorch`; `default_model_filename` model.onnx / model.pt.
- Tensors: ONNX keeps the graph's names; LibTorch uses Triton's `INPUT__i` / `OUTPUT__i` convention. The mapping
  back to the manifest's names travels in `parameters["modelship.io"]`.
- Shapes: a model batched along a leading "batch" axis gets `max_batch_size` > 0 and dims without that axis;
  otherwise `max_batch_size: 0` and full dims. Other named (dynamic) axes are -1.
- `dynamic_batching` (batched models) with a short queue delay, `instance_group` (count; no kind unless asked, so
  Triton uses the GPUs it finds, else the CPU),
  `model_warmup` (one batch-1 request per model: random floats, zero integers), `version_policy`.
- `format` (FORMAT_NCHW / FORMAT_NHWC) on a single image input, from the preprocessing spec's layout: Triton's
  image clients read it to lay out pixels.
- `label_filename` on the first output when labels are given and its type is one Triton's classification
  extension can rank (not FP16/BF16).
- `parameters`: `modelship.preprocess` (the preprocessing spec as JSON, so a client can fetch it through the model
  config API), `modelship.io`, `modelship.labels`, `modelship.export` (sha256, parity, source), and backend knobs
  (`disabled_optimizers` for fp16 ONNX graphs: read only by modelship's local stand-in backend, ignored by
  Triton's native ONNX Runtime backend).
- Opt-in TensorRT accelerator for GPU ONNX models (`trt_fp16`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from modelship.contract import dtypes
from modelship.contract.errors import PublishError
from modelship.contract.iospec import IOSpec, ServedNames, TensorSpec
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import Artifact
from modelship.contract.preprocessing import Layout, PreprocessSpec
from modelship.export.formats import PLATFORMS, SERVED_FILES
from modelship.tasks import DEFAULT_TASK, get_task


class InstanceKind(StrEnum):
    """Where Triton places a model's instances: AUTO writes no kind (Triton then uses every GPU it sees, else the
    CPU: KIND_AUTO); CPU and GPU fix it."""

    AUTO = "auto"
    CPU = "cpu"
    GPU = "gpu"


CONFIG_KINDS = {InstanceKind.CPU: "KIND_CPU", InstanceKind.GPU: "KIND_GPU"}  # AUTO writes none
IMAGE_FORMATS = {Layout.NCHW: "FORMAT_NCHW", Layout.NHWC: "FORMAT_NHWC"}
CLASSIFIABLE = {"float32", "int64", "int32", "int8", "uint8"}  # what Triton's classification extension can rank
LABELS_FILE = "labels.txt"
DEFAULT_MAX_BATCH_SIZE = 16
DEFAULT_QUEUE_DELAY_US = 100
WARMUP_SIDE = 224  # the warmup image's height and width when the export takes any size

# config `parameters` keys written by modelship
PARAM_PREPROCESS = "modelship.preprocess"
PARAM_IO = "modelship.io"
PARAM_LABELS = "modelship.labels"
PARAM_EXPORT = "modelship.export"
PARAM_TASK = "modelship.task"  # a pipeline's task (an artifact's is in its PARAM_EXPORT record)


@dataclass(frozen=True)
class ServingOptions:
    """How one model is served; the `modelship publish` flags."""

    kind: InstanceKind = InstanceKind.AUTO
    instances: int = 1
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    max_queue_delay_us: int = DEFAULT_QUEUE_DELAY_US
    keep_versions: int = 1  # serve the latest N versions; 0 = all
    trt_fp16: bool = False
    max_image_pixels: int = 40_000_000  # a pipeline's preprocess model refuses images decoding to more pixels

    def __post_init__(self) -> None:
        if not isinstance(self.kind, InstanceKind):
            raise PublishError(
                f"instance kind {self.kind!r} is not an InstanceKind", hint=f"use one of {', '.join(InstanceKind)}"
            )
        if self.instances < 1:
            raise PublishError(f"instances must be at least 1, got {self.instances}")
        if self.max_batch_size < 1:
            raise PublishError(f"max batch size must be at least 1, got {self.max_batch_size}")
        if self.max_queue_delay_us < 0:
            raise PublishError(f"max queue delay must be >= 0 µs, got {self.max_queue_delay_us}")
        if self.keep_versions < 0:
            raise PublishError(f"keep-versions must be >= 0 (0 = all), got {self.keep_versions}")
        if self.max_image_pixels < 1:
            raise PublishError(f"max image pixels must be at least 1, got {self.max_image_pixels}")
        if self.trt_fp16 and self.kind is not InstanceKind.GPU:
            raise PublishError("--trt-fp16 needs GPU instances", hint="add --kind gpu")


def triton_names(artifact: Artifact) -> ServedNames:
    """The served names of `artifact`'s tensors: the graph's own for ONNX, INPUT__i/OUTPUT__i for LibTorch."""
    io = artifact.io
    if artifact.format == "torchscript":
        return ServedNames(
            {f"INPUT__{i}": t.name for i, t in enumerate(io.inputs)},
            {f"OUTPUT__{i}": t.name for i, t in enumerate(io.outputs)},
        )
    return ServedNames.identity([t.name for t in io.inputs], [t.name for t in io.outputs])


def dims(spec: TensorSpec, batched: bool) -> list[int]:
    """Triton dims of a tensor: without the batch axis when batched, -1 for every named (dynamic) axis."""
    shape = spec.shape[1:] if batched else spec.shape
    return [d if isinstance(d, int) else -1 for d in shape]


def add_tensor(tensors: Any, name: str, spec: TensorSpec, batched: bool, *, reshape: bool = True) -> None:
    """Declare one input or output in `tensors` (a config's `input` or `output`). A batched tensor that is the batch
    axis alone (a detector's `num [batch]`) is declared `[1]` (Triton needs at least one dim), reshaped to `[]` for
    the model; an ensemble passes it on as the model's clients see it (`reshape=False`)."""
    shape = dims(spec, batched)
    entry = tensors.add(name=name, data_type=triton_dtype(spec), dims=shape or [1])
    if not shape and reshape:
        entry.reshape.SetInParent()


def triton_dtype(spec: TensorSpec) -> int:
    return mc.DataType.Value(dtypes.TABLE[spec.dtype].triton)


def _warmup(
    io: IOSpec, names: dict[str, str], batched: bool, image: tuple[Layout, tuple[int, int]] | None
) -> mc.ModelWarmup:
    """One batch-1 request: random floats, zeros for integers (random ids could fall outside an embedding). A
    dynamic dimension is 1, except an image input's height and width (`image`: its layout and the size to send):
    an image of one pixel is not one every model takes (a strided convolution's kernel can outgrow it)."""
    warmup = mc.ModelWarmup(name="modelship_batch1", batch_size=1 if batched else 0)
    for index, (triton_name, spec) in enumerate(zip(names, io.inputs, strict=True)):
        declared = dims(spec, batched)
        sizes = [1] * len(declared)
        if index == 0 and image is not None:
            layout, (height, width) = image
            sizes[-3:] = [1, height, width] if layout is Layout.NCHW else [height, width, 1]
        shape = [d if d > 0 else size for d, size in zip(declared, sizes, strict=True)]
        floating = spec.dtype.startswith(("float", "bfloat"))
        entry = mc.ModelWarmup.Input(data_type=triton_dtype(spec), dims=shape)
        if floating:
            entry.random_data = True
        else:
            entry.zero_data = True
        warmup.inputs[triton_name].CopyFrom(entry)
    return warmup


@dataclass(frozen=True)
class ExportRecord:
    """What a published model says about where it came from (config parameter `modelship.export`): the export,
    its task, the artifact and its sha256, the checkpoint, the version and the tool that published it."""

    export: str
    task: str
    artifact: str
    sha256: str
    checkpoint_sha256: str
    arch: str | None
    version: int
    tool_version: str

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> ExportRecord:
        """As published; a model published before tasks were recorded is a classifier."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        return cls(**{"task": DEFAULT_TASK, "arch": None, **values})


def build_config(
    model_name: str,
    artifact: Artifact,
    options: ServingOptions,
    *,
    preprocess: PreprocessSpec | None = None,
    labels: list[str] | None = None,
    export_info: ExportRecord | None = None,
) -> mc.ModelConfig:
    """The ModelConfig serving `artifact` as `model_name`."""
    if artifact.format not in PLATFORMS:
        raise PublishError(f"artifact {artifact.name!r}: no Triton platform for format {artifact.format!r}")
    io = artifact.io
    if not io.outputs:
        raise PublishError(f"artifact {artifact.name!r} declares no outputs", hint="re-export with export-model")
    unsupported = sorted({t.dtype for t in (*io.inputs, *io.outputs)} - set(dtypes.TABLE))
    if unsupported:
        raise PublishError(f"artifact {artifact.name!r}: dtypes {unsupported} have no Triton type")
    names = triton_names(artifact)
    batched = io.batched
    config = mc.ModelConfig(
        name=model_name,
        platform=PLATFORMS[artifact.format],
        default_model_filename=SERVED_FILES[artifact.format],
        max_batch_size=options.max_batch_size if batched else 0,
    )
    for triton_name, spec in zip(names.inputs, io.inputs, strict=True):
        add_tensor(config.input, triton_name, spec, batched)
    for triton_name, spec in zip(names.outputs, io.outputs, strict=True):
        add_tensor(config.output, triton_name, spec, batched)
    image_format = _image_format(io, preprocess)
    if image_format:
        config.input[0].format = mc.ModelInput.Format.Value(image_format)
    task = get_task(export_info.task if export_info is not None else DEFAULT_TASK)
    if labels and task.label_output and io.outputs[0].dtype in CLASSIFIABLE:
        config.output[0].label_filename = LABELS_FILE
    elif labels:  # boxes or masks: modelship's clients name the classes
        config.parameters[PARAM_LABELS].string_value = json.dumps(list(labels))
    if batched:
        config.dynamic_batching.max_queue_delay_microseconds = options.max_queue_delay_us
    group = config.instance_group.add(count=options.instances)
    if options.kind in CONFIG_KINDS:
        group.kind = mc.ModelInstanceGroup.Kind.Value(CONFIG_KINDS[options.kind])
    if options.keep_versions:
        config.version_policy.latest.num_versions = options.keep_versions
    else:
        config.version_policy.all.SetInParent()
    image = None
    if image_format and preprocess is not None:  # the image's layout is its preprocessing's
        image = (preprocess.layout, preprocess.output_hw or (WARMUP_SIDE, WARMUP_SIDE))
    config.model_warmup.append(_warmup(io, names.inputs, batched, image))
    if options.trt_fp16 and artifact.format == "onnx":
        accelerator = config.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
        accelerator.parameters["precision_mode"] = "FP16"
        accelerator.parameters["max_workspace_size_bytes"] = str(1 << 30)
    parameters = {PARAM_IO: json.dumps(names.to_dict())}
    if preprocess is not None:
        parameters[PARAM_PREPROCESS] = json.dumps(preprocess.to_dict(), sort_keys=True)
    if labels:
        parameters[PARAM_LABELS] = json.dumps(list(labels))
    if export_info:
        parameters[PARAM_EXPORT] = json.dumps(export_info.to_dict(), sort_keys=True, default=str)
    if artifact.details is not None:  # its variant's fragment (fp16 ONNX: the optimizer it must not run; INT8: the
        parameters.update(artifact.details.triton_parameters())  # CPUs its verdict holds on)
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return config


def _image_format(io: IOSpec, preprocess: PreprocessSpec | None) -> str | None:
    """FORMAT_NCHW/NHWC for a single float image input laid out as the preprocessing spec says (what Triton's
    image clients read to lay out pixels); None for anything else."""
    if preprocess is None or len(io.inputs) != 1:
        return None
    image = io.inputs[0]
    layout = preprocess.layout
    channels = 1 if layout is Layout.NCHW else 3
    if not image.dtype.startswith("float") or len(image.shape) != 4 or image.shape[channels] != 3:
        return None
    if not io.batched:  # Triton's format needs 3 dims, the config's without the batch
        return None
    return IMAGE_FORMATS[layout]


def to_text(config: mc.ModelConfig) -> str:
    return text_format.MessageToString(config)


def parse_config(text: str, source: str = "config.pbtxt") -> mc.ModelConfig:
    """Parse config text as Triton does (rejects unknown fields and malformed text)."""
    try:
        return text_format.Parse(text, mc.ModelConfig())
    except text_format.ParseError as exc:
        raise PublishError(f"{source}: not a valid Triton model config ({exc})") from None
