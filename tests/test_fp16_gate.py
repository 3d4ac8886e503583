"""The fp16 gate judges float16 as it really computes: a block that overflows float16 passes ONNX Runtime's CPU
provider (which computes in float32) but NaNs on a GPU; export-model must keep it in fp32, naming the module, for
ONNX and TorchScript alike."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from modelship.export.formats.torchscript.jit import load_torchscript
from modelship.export.precision.fp16.convert import convert_onnx_fp16
from modelship.export.precision.fp16.ranges import emulate_fp16, intermediate_ranges, out_of_range_nodes
from modelship.parity.onnx_graph import name_nodes, node_module, nodes_outside
from tests.cli_contract import invoke
from tests.fp16_nets import Overflowing

pytestmark = pytest.mark.slow
NET = "tests.fp16_nets:Overflowing"


@pytest.fixture(scope="module")
def fp32_onnx(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fp16") / "net.onnx"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Overflowing().eval(), (torch.randn(2, 3, 16, 16),), str(path), input_names=["x"], output_names=["y"],
            dynamic_axes={"x": {0: "b"}, "y": {0: "b"}}, dynamo=False,
        )  # fmt: skip
    return path


def run(proto: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_the_cpu_hides_the_overflow_and_the_emulation_shows_it(fp32_onnx: Path) -> None:
    fp32 = onnx.load(str(fp32_onnx))
    name_nodes(fp32)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    all_fp16 = convert_onnx_fp16(fp32)
    assert np.isfinite(run(all_fp16, x)).all()  # ONNX Runtime's CPU provider computes these ops in float32
    assert np.isnan(run(emulate_fp16(fp32, [], []), x)).all()  # float16 at every node boundary: what a GPU stores
    kept = out_of_range_nodes(fp32, intermediate_ranges(fp32, [{"x": x}]))
    assert {k.op for k in kept} == {"Pow", "Sqrt"} and {k.module for k in kept} == {"block"}
    fixed = emulate_fp16(fp32, [k.node for k in kept], [])
    np.testing.assert_allclose(run(fixed, x), run(fp32, x), atol=1e-2)


def test_export_keeps_the_overflowing_module_in_fp32(tmp_path: Path) -> None:
    torch.manual_seed(0)
    ckpt = tmp_path / "ovf.pt"
    torch.save(Overflowing().state_dict(), ckpt)
    args = ["export", ckpt, "--arch", NET, "--input", "x:batch,3,16,16", "--onnx", "--torchscript", "--fp16"]
    result = invoke(*args, "--out", tmp_path / "out", "--json")
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.stdout)
    onnx_fp16 = next(a for a in manifest["artifacts"] if a["name"] == "onnx_fp16")
    assert {n["module"] for n in onnx_fp16["details"]["kept_fp32_nodes"]} == {"block"}
    assert "emulated" in onnx_fp16["details"]["fp16_verdict"]
    ts_fp16 = next(a for a in manifest["artifacts"] if a["name"] == "torchscript_fp16")
    assert [k["module"] for k in ts_fp16["details"]["kept_fp32_modules"]] == ["block"]
    scripted = load_torchscript(tmp_path / "out" / "ovf" / ts_fp16["file"])
    assert torch.isfinite(scripted(torch.randn(3, 3, 16, 16))).all()
    human = invoke(*args, "--out", tmp_path / "again")
    assert "onnx_fp16: kept in fp32 to stay within float16's range: block (Pow, Sqrt)" in human.output


class Forked(torch.nn.Module):
    """One tensor read by two convolutions (a ResNet block and its downsample path)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 4, 3)
        self.left = torch.nn.Conv2d(4, 4, 1)
        self.right = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        return self.left(y) + self.right(y)


def test_two_kept_readers_of_one_tensor_stay_valid_onnx(tmp_path: Path) -> None:
    path = tmp_path / "forked.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Forked().eval(), (torch.randn(1, 3, 8, 8),), str(path), dynamo=False)
    fp32 = onnx.load(str(path))
    name_nodes(fp32)
    convs = [n.name for n in fp32.graph.node if n.op_type == "Conv"][1:]  # both readers of the relu output
    converted = convert_onnx_fp16(fp32, node_block_list=convs)  # the converter writes one Cast per reader
    onnx.checker.check_model(converted, full_check=True)


def test_legacy_node_names_give_the_full_module_path() -> None:
    """The legacy exporter names a container's child with its parent's name in front (`conv/conv.0`)."""
    names = ["/detector/head/cls/conv/conv.0/Conv", "/detector/backbone/body/layer1/layer1.0/conv1/Conv", "/Concat_3"]
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], [f"y{i}"], name=n) for i, n in
                                    enumerate(names)], "g", [], [])  # fmt: skip
    assert [node_module(n) for n in graph.node] == [
        "detector.head.cls.conv.0",
        "detector.backbone.body.layer1.0.conv1",
        "",
    ]
    model = onnx.helper.make_model(graph)
    assert nodes_outside(model, ["detector.backbone"]) == [names[0], names[2]]
    assert nodes_outside(model, [""]) == []
