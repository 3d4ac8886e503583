"""A real Triton server on loopback serving published ONNX fp32, ONNX fp16 (fp16 and fp32 I/O) and TorchScript
models, queried over HTTP and gRPC and compared with eager PyTorch. One server for the whole module."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from click.testing import CliRunner
from PIL import Image
from serve_exports import LABELS, PREPROCESS, SIZE, TinyNet, TwoHeads, eager, tiny_model, write_export
from tritonclient.utils import InferenceServerException

from modelship.cli.main import main
from modelship.contract.errors import ClientError
from modelship.contract.iospec import ServedNames
from modelship.preprocess.image import preprocess_images
from modelship.serve.client import TritonClient
from modelship.serve.load.loadgen import run_load
from modelship.serve.load.requests import sender
from modelship.serve.protocols import WireProtocol
from modelship.serve.publish import publish_export
from modelship.serve.served_runner import TritonRunner
from modelship.serve.server import TritonServer

pytestmark = pytest.mark.integration

# served model -> (eager model class, I/O dtype, tolerance)
MODELS = {
    "tiny_onnx": (TinyNet, np.float32, 1e-5),
    "tiny_onnx_fp16": (TinyNet, np.float16, 2e-2),
    "tiny32_onnx_fp16": (TinyNet, np.float32, 2e-2),
    "tiny_torchscript": (TinyNet, np.float32, 1e-5),
    "heads_torchscript": (TwoHeads, np.float32, 1e-5),
}
PROTOCOLS = tuple(WireProtocol)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, report_figure):
    root = tmp_path_factory.mktemp("serve")
    repo = root / "model_repo"
    publish_export(write_export(root / "tiny"), repo, artifacts=["onnx", "onnx_fp16", "torchscript"])
    publish_export(write_export(root / "tiny32", "tiny32", fp16_io=False), repo, artifacts=["onnx_fp16"])
    publish_export(write_export(root / "heads", "heads", two_heads=True), repo, artifacts=["torchscript"])
    began = time.perf_counter()
    with TritonServer(repo, explicit_models=list(MODELS)) as triton:
        report_figure(f"tritonserver ready in {time.perf_counter() - began:.1f} s with {len(MODELS)} models")
        yield triton


def url(server: TritonServer, protocol: WireProtocol) -> str:
    return server.http_url if protocol is WireProtocol.HTTP else server.grpc_url


@pytest.fixture(params=PROTOCOLS)
def client(request: pytest.FixtureRequest, server: TritonServer):
    with TritonClient(url(server, request.param)) as c:
        yield c


def batch(n: int = 3, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3, SIZE, SIZE)).astype(np.float32)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_served_outputs_match_eager_pytorch(client: TritonClient, model: str) -> None:
    cls, dtype, tol = MODELS[model]
    x = batch()
    info = client.model(model)
    out = client.infer(model, {info.inputs[0].name: x.astype(dtype)})
    expected = eager(tiny_model(cls), x)
    expected = expected if isinstance(expected, tuple) else (expected,)
    served = [out[t.name] for t in info.outputs]
    assert [s.dtype for s in served] == [np.dtype(dtype)] * len(expected)
    for got, want in zip(served, expected, strict=True):
        np.testing.assert_allclose(got.astype(np.float32), want, atol=tol, rtol=tol)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_runner_speaks_manifest_names(server: TritonServer, protocol: WireProtocol) -> None:
    x = batch(2)
    heads = TritonRunner(url(server, protocol), "heads_torchscript", protocol=protocol)
    result = heads.run({"image": x})
    logits, features = eager(tiny_model(TwoHeads), x)
    assert sorted(result) == ["output_0", "output_1"]
    np.testing.assert_allclose(result["output_0"], logits, atol=1e-5)
    np.testing.assert_allclose(result["output_1"], features, atol=1e-5)
    fp16 = TritonRunner(url(server, protocol), "tiny_onnx_fp16", protocol=protocol)  # float32 in, cast for fp16 I/O
    assert fp16.run({"image": x})["output"].dtype == np.float16
    assert heads.name == "triton:heads_torchscript"
    heads.close()
    fp16.close()


def test_concurrent_requests_match_single_requests(client: TritonClient) -> None:
    requests = [{"image": batch(n, seed=n)} for n in (1, 2, 3, 4, 1, 2)]
    many = client.infer_many("tiny_onnx", requests)
    for req, got in zip(requests, many, strict=True):
        np.testing.assert_allclose(got["output"], client.infer("tiny_onnx", req)["output"], atol=1e-6)


def test_model_config_carries_preprocess_labels_and_io_names(client: TritonClient) -> None:
    info = client.model("tiny_torchscript")
    assert info.preprocess == PREPROCESS
    assert info.labels == LABELS
    assert info.io_names == ServedNames({"INPUT__0": "image"}, {"OUTPUT__0": "output"})
    assert info.export_info.artifact == "torchscript"
    assert info.max_batch_size == 16
    assert [t.shape for t in info.inputs] == [(-1, 3, SIZE, SIZE)]


def _inference_count(client: TritonClient, model: str) -> int:
    stats = client._client.get_inference_statistics(
        model, **({"as_json": True} if client.protocol is WireProtocol.GRPC else {})
    )
    return int(stats["model_stats"][0].get("inference_count", 0))


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"image": batch().astype(np.float64)}, "is float64, the model takes FP32"),
        ({"image": batch()[:, :2]}, "has shape [3, 2, 16, 16]"),
        ({"image": batch()[0]}, "has shape [3, 16, 16]"),
        ({"image": batch(17)}, "over its max_batch_size 16"),
        ({"pixels": batch()}, "missing inputs ['image']; unexpected inputs ['pixels']"),
    ],
)
def test_bad_requests_are_refused_before_sending(client: TritonClient, inputs: dict, message: str) -> None:
    before = _inference_count(client, "tiny_onnx")
    with pytest.raises(ClientError, match=message.replace("[", r"\[").replace("]", r"\]")):
        client.infer("tiny_onnx", inputs)
    assert _inference_count(client, "tiny_onnx") == before


def test_unknown_model_is_named(client: TritonClient) -> None:
    with pytest.raises(ClientError, match="model 'nope' is not served") as err:
        client.infer("nope", {"image": batch()})
    # the served ones are listed where the repository index is open (Triton's default); modelship serve keeps
    # it behind the repository-API secret
    assert "check the name" in err.value.hint


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_infer_command_classifies_images(server: TritonServer, tmp_path: Path, protocol: WireProtocol) -> None:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"img{i}.png")
        Image.fromarray(rng.integers(0, 255, (24, 20, 3), dtype=np.uint8)).save(paths[-1])
    options = ["--model", "tiny_torchscript", "--url", url(server, protocol), "--json", "--top-k", "2", "--batch", "2"]
    result = CliRunner().invoke(main, ["infer", *map(str, paths), *options])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    expected = eager(tiny_model(TinyNet), preprocess_images(paths, PREPROCESS))
    for prediction, row in zip(payload["predictions"], expected, strict=True):
        assert [e["index"] for e in prediction["top_k"]] == list(np.argsort(-row)[:2])
        assert prediction["top_k"][0]["label"] == LABELS[int(np.argmax(row))]
    assert len(payload["predictions"]) == 3


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_load_windows_leave_no_descriptor_behind(server: TritonServer, protocol: WireProtocol) -> None:
    """Each window's threads end with their clients: a tune's hundreds of windows must not run out of descriptors
    (tritonclient.http left a gevent hub of 2 descriptors behind per thread)."""
    with TritonClient(url(server, protocol)) as client:
        info = client.model("tiny_onnx")
    outputs = {o.name: np.empty(0) for o in info.outputs}
    make = sender(url(server, protocol), protocol, "tiny_onnx", {info.inputs[0].name: batch(1)}, outputs)
    run_load(make, concurrency=4, duration_s=0.05)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(10):
        run_load(make, concurrency=4, duration_s=0.05)
    assert len(os.listdir("/proc/self/fd")) - before < 10  # 40 threads ran


def test_metrics_endpoint_counts_inferences(server: TritonServer) -> None:
    with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
        text = response.read().decode()
    assert 'nv_inference_count{model="tiny_onnx"' in text


# -- the control APIs that change a running server are behind the per-server secret --------------------------------

HTTP_CONTROL = [
    ("POST", "/v2/repository/index", {}),
    ("GET", "/v2/logging", None),
    ("POST", "/v2/logging", {"log_verbose_level": 1}),
    ("GET", "/v2/trace/setting", None),
    ("POST", "/v2/trace/setting", {"trace_rate": "1000"}),
    ("GET", "/v2/systemsharedmemory/status", None),
    ("POST", "/v2/systemsharedmemory/unregister", {}),
    ("GET", "/v2/cudasharedmemory/status", None),
]
HTTP_OPEN = ["/v2/health/ready", "/v2/models/tiny_onnx", "/v2/models/tiny_onnx/config", "/v2/models/tiny_onnx/stats"]


def http_status(server: TritonServer, method: str, path: str, body: dict | None, headers: dict[str, str]) -> int:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{server.http_url}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize(("method", "path", "body"), HTTP_CONTROL, ids=[f"{m} {p}" for m, p, _ in HTTP_CONTROL])
def test_http_control_apis_need_the_secret(server: TritonServer, method: str, path: str, body: dict | None) -> None:
    assert http_status(server, method, path, body, {}) == 403
    assert http_status(server, method, path, body, server.admin_headers) == 200


@pytest.mark.parametrize("path", HTTP_OPEN)
def test_inference_health_metadata_statistics_and_config_stay_open(server: TritonServer, path: str) -> None:
    assert http_status(server, "GET", path, None, {}) == 200


GRPC_CONTROL = {
    "logging": lambda c, h: c.get_log_settings(headers=h),
    "logging update": lambda c, h: c.update_log_settings({"log_verbose_level": 0}, headers=h),
    "trace": lambda c, h: c.get_trace_settings(headers=h),
    "trace update": lambda c, h: c.update_trace_settings(settings={"trace_rate": "1000"}, headers=h),
    "shared memory": lambda c, h: c.get_system_shared_memory_status(headers=h),
    "shared memory unregister": lambda c, h: c.unregister_system_shared_memory(headers=h),
    "repository": lambda c, h: c.get_model_repository_index(headers=h),
}


@pytest.mark.parametrize("call", list(GRPC_CONTROL))
def test_grpc_control_apis_need_the_secret(server: TritonServer, call: str) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url.split("://", 1)[1])
    try:
        with pytest.raises(InferenceServerException, match=r"restricted|PERMISSION|UNAVAILABLE"):
            GRPC_CONTROL[call](client, {})
        GRPC_CONTROL[call](client, server.grpc_admin_headers)
        assert client.get_model_metadata("tiny_onnx").name == "tiny_onnx"  # metadata stays open
        assert client.get_inference_statistics("tiny_onnx") is not None
    finally:
        client.close()
