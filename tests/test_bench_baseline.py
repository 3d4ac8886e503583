"""The serving bench's method: interleaved repeated pairs judged by their median, faults and unstable points
flagged; the in-process baseline in a worker process that never imports torch and agrees with a standalone
program; the FastAPI and PyTriton peers answering what ONNX Runtime answers."""

from __future__ import annotations

import io
import subprocess

import numpy as np
import pytest
import torch
import torchvision

from modelship.bench import inprocess_protocol as protocol
from modelship.bench.measure import InProcess, standalone_throughput
from modelship.bench.peer import PEERS, PeerServer, PyTritonPeer, peer_sender
from modelship.bench.repeated import FAULT_RATIO, PointsInRound, Repetition, Round, interleaved, relative_error
from modelship.bench.workspace import BenchPlan
from modelship.serve.load.requests import sender
from modelship.serve.load.stats import LoadStats
from modelship.serve.protocols import WireProtocol


def stats(throughput: float) -> LoadStats:
    return LoadStats(batch=1, concurrency=1, throughput=throughput, p50_ms=1, p95_ms=1, p99_ms=1, mean_ms=1)


def test_pairs_alternate_and_the_median_ratio_is_reported() -> None:
    order = []
    served = iter([50.0, 90.0, 60.0])
    baseline = iter([100.0, 100.0, 100.0])
    point = interleaved(
        lambda: order.append("served") or stats(next(served)),
        lambda: order.append("in-process") or stats(next(baseline)),
        Repetition(min_pairs=3, max_pairs=3),
    )
    assert order == ["served", "in-process"] * 3
    assert point.ratios == [0.5, 0.9, 0.6] and point.ratio == 0.6
    assert point.describe() == f"median of 3 interleaved pairs (0.50-0.90, ±{point.error:.1%})"
    assert point.flags() == [f"unstable: after 3 pairs the median is known to ±{point.error:.2%} (target ±2.5%)"]
    assert point.median_served.throughput == 60.0


def test_a_steady_point_stops_at_the_minimum_and_a_noisy_one_takes_more_pairs() -> None:
    steady = interleaved(lambda: stats(80.0), lambda: stats(100.0), Repetition(min_pairs=4, max_pairs=16))
    assert len(steady.ratios) == 4 and steady.error == 0 and steady.flags() == []
    noise = iter(80.0 * (1 + 0.15 * np.random.default_rng(5).standard_normal(16)))
    noisy = interleaved(lambda: stats(next(noise)), lambda: stats(100.0), Repetition(4, 16, target=0.06))
    assert 4 < len(noisy.ratios) < 16 and noisy.error <= 0.06 and noisy.flags() == []
    assert relative_error(noisy.ratios[:4]) > 0.06  # what made it go on


def test_served_faster_than_in_process_is_a_measurement_fault() -> None:
    point = interleaved(lambda: stats(130.0), lambda: stats(100.0), Repetition(min_pairs=2))
    (flag,) = point.flags()
    assert flag.startswith(f"measurement fault: served faster than in-process on the same cores (1.30 > {FAULT_RATIO})")
    assert "handicapped" in flag


def test_a_point_spread_over_rounds_takes_its_share_of_the_pairs_in_each() -> None:
    rule = Repetition(min_pairs=6, max_pairs=16)
    points: dict = {}
    steady = []  # a steady point: at least one pair a round, the minimum in all
    noisy = []  # a noisy one: its share of the most a round, all of them in all
    noise = iter(80.0 * (1 + 0.3 * np.random.default_rng(1).standard_normal(16)))
    for index in range(6):
        at = PointsInRound(Round(index, 6), points)
        steady.append(len(at.measure("steady", lambda: stats(80.0), lambda: stats(100.0), rule).ratios))
        noisy.append(len(at.measure("noisy", lambda: stats(next(noise)), lambda: stats(100.0), rule).ratios))
    assert steady == [2, 3, 4, 5, 6, 7]  # the first round's one pair cannot judge its own precision
    assert noisy == [3, 6, 8, 11, 14, 16]
    assert (
        points["noisy"].rounds == 6
        and "16 interleaved pairs in 6 rounds of fresh processes" in points["noisy"].describe()
    )
    single = interleaved(lambda: stats(80.0), lambda: stats(100.0), rule)  # one round: the rule as it was
    assert len(single.ratios) == 6 and single.rounds == 1 and "rounds" not in single.describe()
    with pytest.raises(ValueError):
        Round(6, 6)


@pytest.mark.parametrize("bad", [{"min_pairs": 0}, {"min_pairs": 5, "max_pairs": 4}, {"target": 0}, {"target": 1}])
def test_a_repetition_rule_that_cannot_work_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        Repetition(**bad)


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
    plan = BenchPlan.quick_plan()
    with InProcess(path) as worker:  # InProcess refuses a worker that imported torch
        np.testing.assert_allclose(worker.outputs(inputs)["y"], expected, atol=1e-5)
        measured = worker.measure(inputs, plan)
    assert measured.source == "onnxruntime" and measured.batch == 2 and measured.throughput > 0
    assert standalone_throughput(path, inputs, plan).throughput > 0


def test_the_peer_answers_what_onnx_runtime_answers(model) -> None:
    path, inputs, expected = model
    with PeerServer(path) as peer:
        send = peer_sender(peer.port, inputs)()
        with np.load(io.BytesIO(send())) as answer:
            np.testing.assert_allclose(answer["y"], expected, atol=1e-5)
        send.close()
    assert peer.process.poll() is not None  # stopped


def test_the_pytriton_peer_answers_what_onnx_runtime_answers_and_leaves_no_server(model) -> None:
    path, inputs, expected = model
    with PyTritonPeer(path, threads=1) as peer:
        send = sender(peer.grpc_url, WireProtocol.GRPC, peer.model, inputs, {"y": expected})()
        np.testing.assert_allclose(send()["y"], expected, atol=1e-5)
        send.close()
    assert peer.process.poll() is not None
    children = subprocess.run(["pgrep", "-f", f"grpc-port={peer.grpc_url.rsplit(':', 1)[1]}"], capture_output=True)
    assert children.stdout == b""  # PyTriton's tritonserver stopped with it


def test_every_registered_peer_runs_here() -> None:
    assert [(peer.label, peer.unavailable()) for peer in PEERS] == [("fastapi peer", None), ("pytriton peer", None)]


class _Boxes(torch.nn.Module):
    """A scripted stand-in detector that, like torchvision's, calls a torchvision operator (nms)."""

    def forward(self, image: torch.Tensor) -> dict[str, torch.Tensor]:
        boxes = torch.cat([image.amin(dim=(1, 2))[:, :2], image.amax(dim=(1, 2))[:, :2] + 1], dim=1)
        scores = image.amax(dim=(1, 2, 3))
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return {"boxes": boxes[keep], "scores": scores[keep]}


def test_the_worker_runs_an_image_pipeline_per_request_with_onnx_runtime_or_torchscript(tmp_path) -> None:
    """The vision suite's in-process side: decode, preprocess, run (then the class mask at the photo's size), all
    in the worker, whose TorchScript process has run nothing but the module."""
    from PIL import Image

    from modelship.contract.preprocessing import PreprocessSpec
    from modelship.postprocess import class_mask
    from modelship.preprocess import decode_image, transform

    encoded = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(encoded, "PNG")
    spec = PreprocessSpec(resize=16, crop=None)
    pixels = transform(decode_image(encoded.getvalue()), spec)[None]
    scorer = torch.nn.Conv2d(3, 4, 1).eval()
    torch.onnx.export(scorer, (torch.from_numpy(pixels),), str(tmp_path / "seg.onnx"), input_names=["x"],
                      dynamic_axes={"x": {2: "h", 3: "w"}}, dynamo=False)  # fmt: skip
    torch.jit.script(_Boxes()).save(str(tmp_path / "det.pt"))
    with torch.inference_mode():
        mask = class_mask(scorer(torch.from_numpy(pixels))[0].numpy(), (30, 40))[None]
        boxes = _Boxes()(torch.from_numpy(pixels))["boxes"].numpy()
    plan = BenchPlan.quick_plan()
    for path, runtime, mask_it, expected in (
        (tmp_path / "seg.onnx", {}, True, mask),
        (tmp_path / "det.pt", {"torchscript_output": "boxes"}, False, boxes),
    ):
        with InProcess(path, **runtime) as worker:
            np.testing.assert_allclose(
                worker.image_pipeline(encoded.getvalue(), spec, mask=mask_it), expected, atol=1e-5
            )
            measured = worker.measure_images(plan, concurrency=2)
        assert measured.source == "in-process image pipeline" and measured.concurrency == 2 and measured.throughput > 0


def test_the_workers_requests_and_replies_are_dataclasses_on_both_sides_of_the_pipe(tmp_path) -> None:
    from modelship.contract.preprocessing import PreprocessSpec
    from modelship.contract.tokenizer import TokenizerSource, TokenizerSpec

    window = protocol.Window(window_s=1.0, warmup_s=0.25, max_requests=500)
    tokenizer = TokenizerSource(tmp_path / "tokenizer.json", TokenizerSpec(8, 0, "[PAD]"))
    requests = [
        protocol.Open("m.onnx", 2, ["EliminateDuplicateInitializer"], tokenizer),
        protocol.Open("m.pt", 2, torchscript_output="boxes"),
        protocol.Image("photo.jpg", PreprocessSpec(resize=16, crop=None), mask=True),
        protocol.Outputs("out.npz", inputs="in.npz"),
        protocol.Outputs("out.npy", image=True),
        protocol.Measure(2, window, inputs="in.npz"),
        protocol.Measure(4, window, texts=["a sentence"]),
        protocol.Measure(1, window, image=True),
    ]
    for request in requests:
        assert protocol.read_request(protocol.request_line(request)) == request
    for reply in (protocol.Reply(torch=False), protocol.Reply(stats=stats(12.5)), protocol.Reply(error="OSError: x")):
        assert protocol.read_reply(protocol.reply_line(reply)) == reply
    with pytest.raises(ValueError, match="unknown op 'close'"):
        protocol.read_request('{"op": "close"}')
