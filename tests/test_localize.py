"""Parity failures localised: deliberately broken models, and the report names the right module each time."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from modelship.parity.localize import eager_trace
from tests.cli_contract import invoke
from tests.fp16_nets import Branchy, Layers, LoudNorm, Whisper

pytestmark = pytest.mark.slow
INPUT = "x:batch,3,16,16"


def checkpoint(tmp_path: Path, model: torch.nn.Module) -> Path:
    torch.manual_seed(0)
    path = tmp_path / f"{type(model).__name__.lower()}.pt"
    torch.save(model.state_dict(), path)
    return path


def export(ckpt: Path, arch: str, out: Path, *args: str):
    return invoke("export", ckpt, "--arch", f"tests.fp16_nets:{arch}", "--input", INPUT, "--out", out, *args, "--json")


def test_an_overflowing_layernorm_is_kept_in_fp32_and_named(tmp_path: Path) -> None:
    torch.manual_seed(0)
    result = export(checkpoint(tmp_path, LoudNorm()), "LoudNorm", tmp_path / "out", "--onnx", "--torchscript", "--fp16")
    assert result.exit_code == 0, result.output
    artifacts = {a["name"]: a for a in json.loads(result.stdout)["artifacts"]}
    assert {n["module"] for n in artifacts["onnx_fp16"]["details"]["kept_fp32_nodes"]} == {"norm"}
    assert [k["module"] for k in artifacts["torchscript_fp16"]["details"]["kept_fp32_modules"]] == ["norm"]


def test_outputs_below_float16s_range_keep_the_head(tmp_path: Path) -> None:
    torch.manual_seed(0)
    result = export(checkpoint(tmp_path, Whisper()), "Whisper", tmp_path / "out", "--onnx", "--fp16")
    assert result.exit_code == 0, result.output
    onnx_fp16 = next(a for a in json.loads(result.stdout)["artifacts"] if a["name"] == "onnx_fp16")
    kept = onnx_fp16["details"]["kept_fp32_nodes"]
    assert kept and all("smallest normal" in k["reason"] for k in kept)


def test_a_traced_branch_is_localised_to_its_module(tmp_path: Path) -> None:
    torch.manual_seed(0)
    result = export(checkpoint(tmp_path, Branchy()), "Branchy", tmp_path / "out", "--torchscript", "--trace")
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["explain"]["torchscript"]["first"]["module"] == "gate"
    assert "first divergence in module 'gate'" in payload["error"]


def test_a_corrupted_layer_is_named_by_parity_explain(tmp_path: Path) -> None:
    torch.manual_seed(0)
    result = export(checkpoint(tmp_path, Layers()), "Layers", tmp_path / "out", "--onnx")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "layers"
    proto = onnx.load(str(folder / "model.onnx"))
    weight = next(i for i in proto.graph.initializer if i.name.endswith("conv2.weight"))
    broken = numpy_helper.to_array(weight).copy()
    broken[0] *= -4  # one filter of one layer
    weight.CopyFrom(numpy_helper.from_array(broken, weight.name))
    onnx.save(proto, str(folder / "model.onnx"))
    manifest = json.loads((folder / "manifest.json").read_text())  # as if the export itself had gone wrong
    manifest["artifacts"][0]["sha256"] = hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    args = ["parity", folder, "--arch", "tests.fp16_nets:Layers", "--explain", "--report", tmp_path / "p.json"]
    checked = invoke(*args, "--json")
    assert checked.exit_code == 1
    first = json.loads(checked.stdout)["explain"]["onnx"]["first"]
    assert first["module"] == "conv2" and "Conv" in first["ops"]
    human = invoke(*args)
    assert "=> first divergence in module 'conv2' (Conv)" in human.output


def test_explain_needs_the_checkpoint(tmp_path: Path) -> None:
    result = invoke("parity", tmp_path, "--against", "golden", "--explain", "--json")
    assert result.exit_code == 2 and "--explain needs --against checkpoint" in json.loads(result.stdout)["error"]
    assert np.isfinite(1.0)


def test_a_module_output_is_recorded_before_an_in_place_activation_rewrites_it() -> None:
    """BatchNorm then ReLU(inplace=True) (torchvision's Conv2dNormActivation): the BatchNorm's recorded output keeps
    its negative values, so localisation compares what that module gave, not the activation after it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(inplace=True)).eval()
    trace = eager_trace(model, (torch.randn(1, 3, 8, 8),))
    assert trace.order == ["0", "1", "2"]
    assert trace.outputs["1"].min() < 0 and trace.outputs["2"].min() == 0


def test_a_conv_is_compared_with_the_batchnorm_folded_into_it(tmp_path: Path) -> None:
    """The exporter folds an eval BatchNorm into the Conv before it: the Conv's graph tensor is the norm's output,
    so an exact graph shows no divergence there (it was named the first divergence, cosine 0.80, in SSDlite)."""
    from modelship.contract.iospec import IOSpec, TensorSpec
    from modelship.parity.localize import localize_onnx

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-2, 2)
        model[1].running_var.uniform_(0.1, 4)
    path = tmp_path / "model.onnx"
    x = torch.randn(1, 3, 8, 8)
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], dynamo=False)
    proto = onnx.load(path)
    assert "BatchNormalization" not in {n.op_type for n in proto.graph.node}  # folded
    io = IOSpec(inputs=(TensorSpec("x", (1, 3, 8, 8)),))
    found = localize_onnx(proto, model, io, {"x": x.numpy()}, "fp32", "onnx")
    assert found.first is None and found.compared >= 2, found
