"""Faults a served model meets, with the real server: a backend stub killed, tritonserver aborted by a request,
and the repository API attacked. `modelship serve` (one supervised process for the module) must recover within
seconds with honest readiness, keep its ports, and never run code sent over the network."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from serve_exports import SIZE, write_export

from modelship.serve.client import TritonClient
from modelship.serve.publish import publish_export
from modelship.serve.restricted_api import API_KEY_HEADER
from tests.cli_contract import port_flags
from tests.processes import cmdline, descendants, ready_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[1]
SERVE = (sys.executable, "-c", "from modelship.cli.main import main; main()", "serve", "--json", "--repo")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`modelship serve` on tiny_onnx + tiny_torchscript; yields (process, ready JSON); stderr checked at the end."""
    root = tmp_path_factory.mktemp("faults")
    repo = root / "repo"
    publish_export(write_export(root / "tiny"), repo, artifacts=["onnx", "torchscript"])
    proc = subprocess.Popen(
        [*SERVE, str(repo), *port_flags()],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=open(root / "serve.err", "w"),  # noqa: SIM115 - read after the process ends
        text=True,
    )
    yield proc, ready_json(proc), root / "serve.err"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert not descendants(proc.pid)


def _stub_of(serve_pid: int, model: str) -> int:
    for pid in descendants(serve_pid):
        argv = cmdline(pid)
        if argv and argv[0].endswith("triton_python_backend_stub") and f"/{model}/" in argv[1]:
            return pid
    raise AssertionError(f"no stub for {model}")


def _ready(http: str, model: str) -> bool:
    try:
        with urllib.request.urlopen(f"{http}/v2/models/{model}/ready", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _works(client: TritonClient, model: str) -> bool:
    batch = np.random.default_rng(0).standard_normal((2, 3, SIZE, SIZE), dtype=np.float32)
    inputs = {"image" if "onnx" in model else "INPUT__0": batch}
    try:
        client.infer(model, inputs)
    except Exception:
        return False
    return True


def test_a_killed_stub_is_replaced_and_readiness_is_honest(served, report_figure) -> None:
    proc, ready, _ = served
    readiness: list[bool] = []
    done = threading.Event()

    def watch() -> None:  # requests wait while the model loads, so readiness is sampled beside them
        while not done.is_set():
            readiness.append(_ready(ready["http"], "tiny_onnx"))
            time.sleep(0.02)

    with TritonClient(ready["http"]) as client:
        assert _works(client, "tiny_onnx") and _works(client, "tiny_torchscript")
        os.kill(_stub_of(proc.pid, "tiny_onnx"), signal.SIGKILL)
        killed = time.perf_counter()
        watcher = threading.Thread(target=watch)
        watcher.start()
        other_ok = True
        try:
            while not _works(client, "tiny_onnx"):
                assert time.perf_counter() - killed < 30, "not recovered after 30 s"
                other_ok &= _works(client, "tiny_torchscript")
                time.sleep(0.1)
            recovered = time.perf_counter() - killed
        finally:
            done.set()
            watcher.join()
    assert not all(readiness), "the model answered READY the whole time it could not serve"
    assert other_ok, "the other model stopped serving"
    assert _ready(ready["http"], "tiny_onnx")
    report_figure(f"stub killed: tiny_onnx serving again after {recovered:.1f} s (unload + load by the supervisor)")


def test_a_request_that_aborts_tritonserver_is_survived(served, report_figure) -> None:
    proc, ready, errors = served
    body = json.dumps(
        {"inputs": [{"name": "image", "shape": [16, 3, 100000, 100000], "datatype": "FP32", "data": [1.0]}]}
    ).encode()
    request = urllib.request.Request(f"{ready['http']}/v2/models/tiny_onnx/infer", data=body, method="POST")
    sent = time.perf_counter()
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(request, timeout=30)  # Triton 2.51 aborts (std::bad_alloc) and drops the connection
    with TritonClient(ready["grpc"]) as client:
        while not _works(client, "tiny_onnx"):
            assert time.perf_counter() - sent < 60, "not restarted after 60 s"
            assert proc.poll() is None, "modelship serve exited"
            time.sleep(0.2)
    recovered = time.perf_counter() - sent
    assert "restarting" in errors.read_text()
    report_figure(f"tritonserver aborted by a request: serving again after {recovered:.1f} s (same ports)")


def _load_with_files(http: str, marker: Path, headers: dict[str, str]) -> int:
    """Triton's load API with an inline Python-backend model whose initialize() would create `marker`."""
    code = (
        "import pathlib\n"
        "class TritonPythonModel:\n"
        f"    def initialize(self, args):\n        pathlib.Path({str(marker)!r}).touch()\n"
    )
    config = json.dumps({"backend": "python", "max_batch_size": 0, "input": [], "output": []})
    body = {"parameters": {"config": config, "file:1/model.py": base64.b64encode(code.encode()).decode()}}
    request = urllib.request.Request(
        f"{http}/v2/repository/models/evil/load", data=json.dumps(body).encode(), method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_repository_api_runs_no_code_without_the_secret(served, tmp_path) -> None:
    _, ready, _ = served
    marker = tmp_path / "MARK"
    for headers in ({}, {API_KEY_HEADER: "guess"}, {"admin-key": "x"}):
        assert _load_with_files(ready["http"], marker, headers) == 403
    assert not marker.exists()
    key_file = Path(ready["repository_api"]["key_file"])
    assert key_file.stat().st_mode & 0o777 == 0o600
    with TritonClient(ready["grpc"]) as client, pytest.raises(Exception, match="restricted"):  # gRPC too
        client._client.load_model("evil")
