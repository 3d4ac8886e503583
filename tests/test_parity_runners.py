"""Runners on real backends: eager PyTorch, TorchScript and ONNX Runtime (fp32 and fp16), and crash isolation."""

from __future__ import annotations

import copy
import os
import signal
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from modelship.contract.errors import ParityError
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.parity import (
    IsolatedRunner,
    OnnxRuntimeRunner,
    ToleranceConfig,
    TorchRunner,
    compare_runners,
    input_sets,
    make_session,
)
from modelship.parity.runner_protocol import BaseRunner
from modelship.parity.runners import is_fp16_model

IO = IOSpec(
    (TensorSpec("image", ("batch", 3, 16, 16)),),
    (TensorSpec("logits", ("batch", 10)), TensorSpec("features", ("batch", 8))),
)


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.body(x).flatten(1)
        return self.head(features), features


def _export(model: nn.Module, example: torch.Tensor, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter announces its deprecation
        torch.onnx.export(
            model,
            (example,),
            str(path),
            input_names=["image"],
            output_names=["logits", "features"],
            dynamic_axes={name: {0: "batch"} for name in ("image", "logits", "features")},
            dynamo=False,
        )
    return path


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    torch.manual_seed(0)
    model = TinyNet().eval()
    folder = tmp_path_factory.mktemp("tiny")
    example = torch.randn(1, 3, 16, 16)
    fp32 = _export(model, example, folder / "model.onnx")
    half = copy.deepcopy(model).half()
    fp16 = _export(half, example.half(), folder / "model_fp16.onnx")
    return model, half, fp32, fp16


def test_eager_vs_onnx_fp32(artifacts) -> None:
    model, _, fp32, _ = artifacts
    report = compare_runners(
        TorchRunner(model, IO),
        OnnxRuntimeRunner(fp32, IO, "onnx"),
        input_sets(IO, [1, 8]),
        ToleranceConfig.for_precision("fp32"),
    )
    assert report.passed, report.failures()
    assert [m.name for m in report.outputs] == ["logits", "features"]
    assert max(m.max_abs for m in report.outputs) < 1e-5


def test_fp16_onnx_takes_float32_inputs_and_passes_fp16_tolerance(artifacts) -> None:
    model, _, _, fp16 = artifacts
    assert is_fp16_model(fp16)
    runner = OnnxRuntimeRunner(fp16, IO, "onnx_fp16")
    assert runner.session.get_inputs()[0].type == "tensor(float16)"
    sets = input_sets(IO, [1, 8])
    out = runner.run(sets[0])
    assert out["logits"].dtype == np.float16
    report = compare_runners(TorchRunner(model, IO), runner, sets, ToleranceConfig.for_precision("fp16"))
    assert report.passed, report.failures()
    assert report.outputs[0].max_abs > 0  # really ran in half precision
    strict = ToleranceConfig.for_precision("fp32", {"atol": 1e-6, "rtol": 1e-6})
    assert not compare_runners(TorchRunner(model, IO), runner, sets, strict).passed


def test_half_torch_module_gets_half_inputs(artifacts) -> None:
    half = artifacts[1]
    out = TorchRunner(half, IO, "eager_fp16").run(input_sets(IO, [2])[0])
    assert out["logits"].dtype == np.float16 and out["features"].shape == (2, 8)


def test_torchscript_runner_matches_eager_exactly(artifacts, tmp_path) -> None:
    model = artifacts[0]
    path = tmp_path / "model.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))  # torch.jit announces its deprecation
        torch.jit.save(torch.jit.script(model), str(path))
        scripted = TorchRunner(torch.jit.load(str(path)), IO, "torchscript")
    report = compare_runners(
        TorchRunner(model, IO), scripted, input_sets(IO, [1, 3]), ToleranceConfig.for_precision("fp32")
    )
    assert report.passed and report.outputs[0].max_abs == 0.0


def test_output_count_mismatch_and_bad_inputs_are_parity_errors(artifacts) -> None:
    model, _, fp32, _ = artifacts
    one_output = IOSpec(IO.inputs, (TensorSpec("logits", ("batch", 10)),))
    with pytest.raises(ParityError, match="returned 2 outputs"):
        TorchRunner(model, one_output).run(input_sets(IO, [1])[0])
    with pytest.raises(ParityError, match="no input named 'image'"):
        OnnxRuntimeRunner(fp32, IO).run({"pixels": np.zeros((1, 3, 16, 16), np.float32)})
    with pytest.raises(ParityError, match=r"model\.onnx: image\[2\] is fixed to 16 in the graph, got 15"):
        OnnxRuntimeRunner(fp32, IO).run({"image": np.zeros((1, 3, 15, 16), np.float32)})
    with pytest.raises(ParityError, match=r"ONNX Runtime failed on model\.onnx"):
        OnnxRuntimeRunner(fp32, IO).run({"image": np.zeros((1, 3, 16), np.float32)})


def test_unloadable_onnx_file_is_a_parity_error(tmp_path) -> None:
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ParityError, match=r"broken\.onnx"):
        make_session(bad)


def test_isolated_onnx_runner_matches_in_process(artifacts) -> None:
    _, _, fp32, _ = artifacts
    inputs = input_sets(IO, [2])[0]
    isolated = OnnxRuntimeRunner(fp32, IO, "onnx", isolated=True)
    try:
        got = isolated.run(inputs)
        again = isolated.run(inputs)  # the child serves several requests
    finally:
        isolated.close()
    expected = OnnxRuntimeRunner(fp32, IO).run(inputs)
    for name in expected:
        assert np.array_equal(got[name], expected[name]) and np.array_equal(again[name], expected[name])


class SegfaultingRunner:
    """Stands in for a native library that crashes: it kills its own process with SIGSEGV."""

    name = "crashy"

    def __init__(self, crash_on_create: bool) -> None:
        if crash_on_create:
            os.kill(os.getpid(), signal.SIGSEGV)

    def run(self, inputs):
        os.kill(os.getpid(), signal.SIGSEGV)


@pytest.mark.parametrize("crash_on_create", [True, False])
def test_crashing_child_becomes_a_parity_error(crash_on_create: bool) -> None:
    from functools import partial

    runner = IsolatedRunner(partial(SegfaultingRunner, crash_on_create), "crashy", what="ONNX Runtime", target="m.onnx")
    with pytest.raises(ParityError, match=r"ONNX Runtime crashed \(signal 11\) on m.onnx") as info:
        runner.run({"x": np.zeros(1)})
    assert info.value.details["signal_name"] == "SIGSEGV"


def test_crash_in_candidate_gives_a_failed_report_not_a_dead_process() -> None:
    from functools import partial

    io = IOSpec((TensorSpec("x", ("batch", 4)),), (TensorSpec("y", ("batch", 4)),))

    class Identity(BaseRunner):
        name = "reference"

        def run(self, inputs):
            return {"y": inputs["x"]}

    crashy = IsolatedRunner(partial(SegfaultingRunner, False), "onnx_fp16", what="ONNX Runtime", target="m.onnx")
    report = compare_runners(Identity(), crashy, input_sets(io, [1, 2]), ToleranceConfig.for_precision("fp16"))
    assert not report.passed and "crashed (signal 11)" in report.error
