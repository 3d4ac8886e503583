"""The serving bench's method: interleaved repeated pairs judged by their median, faults and unstable points
flagged; the in-process baseline in a worker process that never imports torch and agrees with a standalone
program; the FastAPI peer answering what ONNX Runtime answers."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from modelship.bench.measure import InProcess, standalone_throughput
from modelship.bench.peer import PeerServer, peer_sender
from modelship.bench.repeated import FAULT_RATIO, interleaved
from modelship.bench.stats import LoadStats
from modelship.bench.workspace import Plan


def stats(throughput: float) -> LoadStats:
    return LoadStats(batch=1, concurrency=1, throughput=throughput, p50_ms=1, p95_ms=1, p99_ms=1, mean_ms=1)


def test_pairs_alternate_and_the_median_ratio_is_reported() -> None:
    order = []
    served = iter([50.0, 90.0, 60.0])
    baseline = iter([100.0, 100.0, 100.0])
    point = interleaved(
        lambda: order.append("served") or stats(next(served)),
        lambda: order.append("in-process") or stats(next(baseline)),
        3,
    )
    assert order == ["served", "in-process"] * 3
    assert point.ratios == [0.5, 0.9, 0.6] and point.ratio == 0.6
    assert point.describe() == "median of 3 interleaved pairs (0.50-0.90)"
    assert point.flags(max_spread=0.10) == ["unstable: the ratios spread 67% (> 10%)"]
    assert point.median_served.throughput == 60.0


def test_served_faster_than_in_process_is_a_measurement_fault() -> None:
    point = interleaved(lambda: stats(130.0), lambda: stats(100.0), 2)
    (flag,) = point.flags(max_spread=0.10)
    assert flag.startswith(f"measurement fault: served faster than in-process on the same cores (1.30 > {FAULT_RATIO})")
    assert "handicapped" in flag


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("baseline") / "model.onnx"
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).eval()
    axes = {"x": {0: "batch"}, "y": {0: "batch"}}
    torch.onnx.export(
        net, (torch.randn(1, 3, 32, 32),), str(path), input_names=["x"], output_names=["y"], dynamic_axes=axes,
        dynamo=False,
    )  # fmt: skip
    inputs = {"x": np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    with torch.inference_mode():
        expected = net(torch.from_numpy(inputs["x"])).numpy()
    return path, inputs, expected


def test_the_worker_never_imports_torch_and_agrees_with_a_standalone_program(model) -> None:
    path, inputs, expected = model
    plan = Plan.quick_plan()
    with InProcess(path) as worker:  # InProcess refuses a worker that imported torch
        np.testing.assert_allclose(worker.outputs(inputs)["y"], expected, atol=1e-5)
        measured = worker.measure(inputs, plan)
    assert measured.source == "onnxruntime" and measured.batch == 2 and measured.throughput > 0
    assert standalone_throughput(path, inputs, 0.3).throughput > 0


def test_the_peer_answers_what_onnx_runtime_answers(model) -> None:
    path, inputs, expected = model
    with PeerServer(path) as peer:
        send = peer_sender(peer.port, inputs)()
        with np.load(io.BytesIO(send())) as answer:
            np.testing.assert_allclose(answer["y"], expected, atol=1e-5)
        send.close()
    assert peer.process.poll() is not None  # stopped
