"""Unit tests of the exporters' pure parts: input specs, opsets, script-error messages, dynamic-axis checks."""

from __future__ import annotations

import onnx
import pytest
from torch import nn

from modelship.contract.errors import ExportError, UsageError
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.contract.opsets import DEFAULT_TRITON, resolve_opset, runtime_target
from modelship.contract.preprocessing import PreprocessSpec
from modelship.export.build import float_io
from modelship.export.formats.onnx.exporter import check_dynamic_axes
from modelship.export.formats.onnx.graph import Versions, cap_versions, provenance_metadata, set_metadata
from modelship.export.formats.torchscript.jit import script_module
from modelship.export.io_resolve import (
    InputSource,
    ResolvedInputs,
    discover_outputs,
    forward_input_names,
    image_size,
    parse_axes,
    parse_input_option,
    resolve_inputs,
)
from modelship.export.precision.fp16.options import Fp16Options
from modelship.export.precision.int8.options import Int8Options
from modelship.export.spec import ExportSpec


def test_parse_input_option_reads_dims_dtype_range_and_sizes():
    spec, sizes = parse_input_option("input_ids:batch,sequence=32:int64:0..1000")
    assert spec == TensorSpec("input_ids", ("batch", "sequence"), "int64", (0.0, 1000.0))
    assert sizes == {"sequence": 32}
    spec, sizes = parse_input_option("x:batch,3,224,224")
    assert spec.shape == ("batch", 3, 224, 224) and spec.dtype == "float32" and sizes == {}


@pytest.mark.parametrize(
    "text", ["x", "x:batch:float32:1..2:extra", "x:batch:complex64", "x:batch,3-2", "x:batch:int64:5", "x:b,s=0"]
)
def test_parse_input_option_rejects_malformed_specs(text):
    with pytest.raises(UsageError):
        parse_input_option(text)


def test_parse_axes():
    assert parse_axes(" height, width ,") == ("height", "width")
    assert parse_axes(None) == ()


class TwoInputs(nn.Module):
    def forward(self, input_ids, attention_mask):
        return input_ids * attention_mask


def test_forward_names_and_flag_inputs_must_start_with_batch():
    assert forward_input_names(TwoInputs()) == ["input_ids", "attention_mask"]
    import timm

    assert forward_input_names(timm.create_model("vit_tiny_patch16_224", pretrained=False)) == ["x"]
    with pytest.raises(UsageError, match="first dimension must be 'batch'"):
        resolve_inputs(TwoInputs(), input_options=["input_ids:sequence:int64", "attention_mask:sequence:int64"])
    with pytest.raises(UsageError, match="cannot guess the inputs"):
        resolve_inputs(TwoInputs())


def test_image_inputs_from_the_architecture_and_dynamic_height_width():
    import torchvision

    resolved = resolve_inputs(torchvision.models.resnet18(), arch="resnet18")
    assert resolved.inputs == (TensorSpec("x", ("batch", 3, 224, 224)),)
    assert resolved.source is InputSource.ARCHITECTURE and resolved.dynamic_axes == ("batch",)
    dynamic = resolve_inputs(torchvision.models.resnet18(), arch="resnet18", dynamic=("height", "width"))
    assert dynamic.inputs[0].shape == ("batch", 3, "height", "width")
    assert dynamic.sizes == {"height": 224, "width": 224}
    with pytest.raises(UsageError, match="no input has such an axis"):
        resolve_inputs(torchvision.models.resnet18(), arch="resnet18", dynamic=("sequence",))


def test_image_size_follows_torchvision_weights_vit_attribute_and_timm_cfg():
    import timm
    import torchvision

    assert image_size(nn.Conv2d(3, 3, 1), "inception_v3") == (299, 299)
    assert image_size(torchvision.models.vit_b_16(image_size=384), "vit_b_16") == (384, 384)
    assert image_size(timm.create_model("vit_tiny_patch16_384", pretrained=False), "timm/x") == (384, 384)
    assert image_size(nn.Conv2d(3, 3, 1), "pkg.mod:Factory") == (224, 224)
    assert image_size(nn.Conv2d(3, 3, 1), "pkg.mod:Factory", PreprocessSpec(crop=(64, 48))) == (64, 48)
    assert image_size(nn.Conv2d(3, 3, 1), "resnet50", PreprocessSpec(crop=160)) == (160, 160)


def test_a_reference_is_chosen_by_its_name():
    from modelship.export.check_reference import Against, ReferenceChoice

    assert ReferenceChoice().against is Against.CHECKPOINT
    assert ReferenceChoice(against="golden").against is Against.GOLDEN
    with pytest.raises(UsageError, match=r"unknown reference 'eager' \(use one of checkpoint, golden\)"):
        ReferenceChoice(against="eager")


def test_metadata_io_is_used_when_no_flag():
    io = IOSpec((TensorSpec("pixels", ("batch", 1, 8, 8)),))
    resolved = resolve_inputs(nn.Conv2d(1, 2, 3), io=io)
    assert resolved.inputs == io.inputs and resolved.source is InputSource.METADATA


class DownsampleAndDict(nn.Module):
    def forward(self, x):
        pooled = nn.functional.avg_pool2d(x, 2)
        return {"same": x * 2, "half": pooled, "scalar_per_item": x.mean(dim=(1, 2, 3))}


def test_discover_outputs_names_axes_and_derived_dims():
    resolved = ResolvedInputs((TensorSpec("x", ("batch", 3, "height", "width")),), {"height": 16, "width": 16})
    io = discover_outputs(DownsampleAndDict(), resolved)
    shapes = {t.name: t.shape for t in io.outputs}
    assert shapes == {
        "same": ("batch", 3, "height", "width"),
        "half": ("batch", 3, "half_height", "half_width"),
        "scalar_per_item": ("batch",),
    }


def test_opset_table_and_resolution():
    target = runtime_target(DEFAULT_TRITON)
    assert (target.onnxruntime, target.max_opset, target.max_ir_version) == ("1.19.2", 21, 10)
    assert runtime_target("2.51") is target and runtime_target("24.10") is target
    assert resolve_opset(None, target) == 21 and resolve_opset(18, target) == 18
    with pytest.raises(UsageError, match="outside"):
        resolve_opset(22, target)
    with pytest.raises(UsageError, match="unknown Triton release"):
        runtime_target("1.0")


def test_cap_versions_lowers_ir_and_refuses_high_opsets():
    target = runtime_target()
    proto = onnx.helper.make_model(
        onnx.helper.make_graph([], "g", [], []), opset_imports=[onnx.helper.make_opsetid("", 21)]
    )
    proto.ir_version = 11
    assert cap_versions(proto, target) == Versions(opset=21, ir_version=10, exported_ir_version=11)
    proto.opset_import[0].version = 23
    with pytest.raises(ExportError, match="opset 23"):
        cap_versions(proto, target)


def test_metadata_props_are_replaced_not_duplicated():
    proto = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    set_metadata(proto, provenance_metadata(arch="resnet18", io={"inputs": []}, preprocess=None))
    set_metadata(proto, {"arch": "resnet50"})
    assert {p.key: p.value for p in proto.metadata_props} == {
        "modelship.arch": "resnet50",
        "modelship.io": '{"inputs": []}',
    }


class Unscriptable(nn.Module):
    def forward(self, x, **extra):
        return x


def test_script_failure_names_the_cause_the_place_and_trace():
    with pytest.raises(ExportError) as info:
        script_module(Unscriptable())
    message = str(info.value)
    assert "keyword-only" in message or "variable number of arguments" in message
    assert "test_export_units.py:" in message and "**extra" in message
    assert "--trace" in message


def test_check_dynamic_axes_reports_baked_axes():
    value = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 3])
    out = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])
    node = onnx.helper.make_node("Identity", ["x"], ["y"])
    proto = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [value], [out]))
    io = IOSpec((TensorSpec("x", ("batch", 3)),), (TensorSpec("y", ("batch", 3)),))
    with pytest.raises(ExportError, match=r"x\[0\] \(batch\) = 4"):
        check_dynamic_axes(proto, io)


def test_float_io_switches_only_float_tensors():
    io = IOSpec((TensorSpec("ids", ("batch",), "int64"), TensorSpec("x", ("batch",))), (TensorSpec("y", ("batch",)),))
    half = float_io(io, "float16", inputs=True, outputs=False)
    assert [t.dtype for t in half.inputs] == ["int64", "float16"] and half.outputs[0].dtype == "float32"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"options": (Fp16Options(io=True),)}, "--fp16-io needs --fp16"),
        ({"options": (Int8Options(keep_slower=True),), "precisions": ("fp16",)}, "--keep-slower needs --int8"),
        ({"batch_sizes": (4, 4)}, "two different batch sizes"),
        ({"formats": ("tflite",)}, "unknown export format"),
        ({"tolerances": {"fp16": {"atoll": 1}}}, "unknown tolerance"),
    ],
)
def test_export_spec_validates(tmp_path, kwargs, match):
    with pytest.raises(UsageError, match=match):
        ExportSpec(out_dir=tmp_path / "m", **kwargs)
    with pytest.raises(UsageError, match="not a safe folder name"):
        ExportSpec(out_dir=tmp_path / "my model")


def test_default_labels_come_from_the_architecture_when_the_head_matches():
    from modelship.export.labels import default_labels

    imagenet = TensorSpec("logits", ("batch", 1000))
    assert default_labels("resnet50", imagenet)[:2] == ["tench", "goldfish"]
    assert default_labels("timm/vit_tiny_patch16_224", imagenet)[281] == "tabby"
    assert default_labels("resnet50", TensorSpec("logits", ("batch", 10))) is None  # a re-headed model
    assert default_labels("pkg.mod:Factory", imagenet) is None
