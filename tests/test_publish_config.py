"""config.pbtxt generation: every config parses as Triton's ModelConfig and says what the artifact needs."""

from __future__ import annotations

import json

import pytest
from google.protobuf import text_format
from serve_exports import LABELS, PREPROCESS, io_spec
from tritonclient.grpc import model_config_pb2 as mc

from modelship.contract.errors import PublishError
from modelship.contract.iospec import IOSpec, ServedNames, TensorSpec
from modelship.contract.manifest import Artifact
from modelship.serve.triton_config import (
    InstanceKind,
    ServingOptions,
    build_config,
    parse_config,
    to_text,
    triton_names,
)


def artifact(name: str = "onnx", fmt: str = "onnx", precision: str = "fp32", io: IOSpec | None = None) -> Artifact:
    return Artifact(name, fmt, precision, f"model.{fmt}", "0" * 64, io or io_spec())


def roundtrip(config: mc.ModelConfig) -> mc.ModelConfig:
    parsed = text_format.Parse(to_text(config), mc.ModelConfig())
    assert parsed == config
    return parsed


@pytest.mark.parametrize(
    ("art", "platform", "in_name", "out_name", "dtype"),
    [
        (artifact(), "onnxruntime_onnx", "image", "logits", mc.TYPE_FP32),
        (
            artifact("onnx_fp16", "onnx", "fp16", io_spec("float16")),
            "onnxruntime_onnx",
            "image",
            "logits",
            mc.TYPE_FP16,
        ),
        (artifact("torchscript", "torchscript"), "pytorch_libtorch", "INPUT__0", "OUTPUT__0", mc.TYPE_FP32),
        (
            artifact("torchscript_fp16", "torchscript", "fp16", io_spec("float16")),
            "pytorch_libtorch",
            "INPUT__0",
            "OUTPUT__0",
            mc.TYPE_FP16,
        ),
    ],
)
def test_config_per_artifact_kind(art: Artifact, platform: str, in_name: str, out_name: str, dtype: int) -> None:
    config = roundtrip(build_config("m", art, ServingOptions(), preprocess=PREPROCESS, labels=LABELS))
    assert config.platform == platform
    assert config.default_model_filename == ("model.onnx" if art.format == "onnx" else "model.pt")
    assert config.max_batch_size == 16
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [(in_name, dtype, [3, 16, 16])]
    assert [(o.name, o.data_type, list(o.dims)) for o in config.output] == [(out_name, dtype, [5])]
    fp16_out = dtype == mc.TYPE_FP16  # Triton's classification extension cannot rank FP16 outputs
    assert config.output[0].label_filename == ("" if fp16_out else "labels.txt")
    assert config.input[0].format == mc.ModelInput.FORMAT_NCHW  # what Triton's image clients require
    assert config.dynamic_batching.max_queue_delay_microseconds == 100
    # no fixed kind: Triton places instances on the GPUs it finds, else the CPU
    assert [(g.kind, g.count) for g in config.instance_group] == [(mc.ModelInstanceGroup.KIND_AUTO, 1)]
    assert config.version_policy.latest.num_versions == 1
    (warmup,) = config.model_warmup
    assert warmup.batch_size == 1
    assert list(warmup.inputs[in_name].dims) == [3, 16, 16] and warmup.inputs[in_name].random_data
    assert json.loads(config.parameters["modelship.preprocess"].string_value) == PREPROCESS.to_dict()
    assert json.loads(config.parameters["modelship.labels"].string_value) == LABELS
    fp16_onnx = art.format == "onnx" and art.precision == "fp16"
    assert ("disabled_optimizers" in config.parameters) == fp16_onnx


def test_unbatched_model_has_full_dims_and_dynamic_axes() -> None:
    io = IOSpec(
        (TensorSpec("input_ids", (1, "sequence"), "int64"),), (TensorSpec("hidden", (1, "sequence", 8), "float32"),)
    )
    config = roundtrip(build_config("m", artifact(io=io), ServingOptions()))
    assert config.max_batch_size == 0
    assert list(config.input[0].dims) == [1, -1] and config.input[0].data_type == mc.TYPE_INT64
    assert list(config.output[0].dims) == [1, -1, 8]
    assert not config.HasField("dynamic_batching")
    warm = config.model_warmup[0]
    assert warm.batch_size == 0 and list(warm.inputs["input_ids"].dims) == [1, 1] and warm.inputs["input_ids"].zero_data


def test_torchscript_names_map_back_to_the_manifest() -> None:
    io = io_spec(outputs=(("logits", 5), ("features", 8)))
    assert triton_names(artifact("torchscript", "torchscript", io=io)) == ServedNames(
        {"INPUT__0": "image"}, {"OUTPUT__0": "logits", "OUTPUT__1": "features"}
    )
    config = build_config("m", artifact("torchscript", "torchscript", io=io), ServingOptions())
    assert json.loads(config.parameters["modelship.io"].string_value)["outputs"]["OUTPUT__1"] == "features"


def test_gpu_tensorrt_instances_and_version_policy() -> None:
    options = ServingOptions(kind=InstanceKind.GPU, instances=2, trt_fp16=True, keep_versions=0, max_queue_delay_us=500)
    config = roundtrip(build_config("m", artifact(), options))
    assert [(g.kind, g.count) for g in config.instance_group] == [(mc.ModelInstanceGroup.KIND_GPU, 2)]
    (trt,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert trt.name == "tensorrt" and trt.parameters["precision_mode"] == "FP16"
    assert config.version_policy.HasField("all")
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    torchscript = build_config("m", artifact("torchscript", "torchscript"), options)
    assert not torchscript.optimization.execution_accelerators.gpu_execution_accelerator


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trt_fp16": True}, "needs GPU instances"),
        ({"kind": "tpu"}, "not an InstanceKind"),
        ({"instances": 0}, "at least 1"),
        ({"keep_versions": -1}, "keep-versions"),
    ],
)
def test_bad_serving_options_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(PublishError, match=message):
        ServingOptions(**kwargs)


def test_parse_config_rejects_malformed_text() -> None:
    with pytest.raises(PublishError, match="not a valid Triton model config"):
        parse_config('name: "m"\nmax_batch_sise: 4\n')


def test_the_stock_dockerfile_adds_what_the_python_models_import() -> None:
    from modelship.serve.stock_image import stock_dockerfile

    assert stock_dockerfile(["m_onnx", "m_postprocess"]) is None
    both = stock_dockerfile(["a_preprocess", "a_pipeline", "b_tokenize", "b_pipeline"])
    assert both is not None and both.splitlines()[0].startswith("FROM nvcr.io/nvidia/tritonserver:")
    assert both.splitlines()[1] == "RUN pip install --no-cache-dir 'pillow>=10' 'tokenizers>=0.20'"
