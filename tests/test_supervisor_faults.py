"""`modelship serve`'s supervisor on a local folder and on object storage (moto_server) alike: a crashed stub is
reloaded (with the versions it served), an aborted tritonserver restarted, while what Triton does on purpose
(a version unloaded or replaced, the model unloaded and loaded again through the repository API) is left alone.
Stopping leaves no temporary model copies behind."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fleet_support import MODEL, Replica, start_replica
from serve_exports import SIZE, write_export

from modelship.contract.errors import ClientError
from modelship.serve.client import TritonClient
from modelship.serve.restricted_api import API_KEY_HEADER
from modelship.testing.object_store import moto_server
from tests.cli_contract import invoke
from tests.processes import cmdline, descendants

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BATCH = {"image": np.zeros((1, 3, SIZE, SIZE), np.float32)}


def publish(export: Path, repo: str) -> None:
    for version in (1, 2):
        args = ("--artifact", "onnx", "--pipeline-artifact", "none", "--version", version, "--keep-versions", 1)
        result = invoke("publish", export, "--repo", repo, *args, "--json")
        assert result.exit_code == 0, result.output


@pytest.fixture(scope="module", params=["folder", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp(f"supervised-{request.param}")
    export = write_export(root / "tiny")
    if request.param == "folder":
        publish(export, str(root / "repo"))
        yield str(root / "repo"), root
        return
    with moto_server() as store:
        publish(export, store.url("supervised"))
        yield store.url("supervised"), root


@pytest.fixture(scope="module")
def replica(storage: tuple[str, Path]) -> Iterator[Replica]:
    served = start_replica(*storage, 0)
    yield served
    served.stop()


class Api:
    """Triton's repository API on a replica, with its secret."""

    def __init__(self, replica: Replica) -> None:
        self.url = replica.http_url
        self.headers = {API_KEY_HEADER: replica.api_key_file.read_text().strip()}

    def call(self, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, headers=self.headers)
        with urllib.request.urlopen(request, timeout=120) as response:
            payload = response.read()
        return json.loads(payload) if payload else {}

    def load(self, versions: list[int] | None = None) -> None:
        """Load the model with the repository's config, or with `versions` as its version policy."""
        body = {}
        if versions is not None:
            config = {**self.call(f"/v2/models/{MODEL}/config"), "version_policy": {"specific": {"versions": versions}}}
            body = {"parameters": {"config": json.dumps(config)}}
        self.call(f"/v2/repository/models/{MODEL}/load", body)

    def versions(self) -> list[str]:
        return self.call(f"/v2/models/{MODEL}")["versions"]


def events_during(replica: Replica, action) -> str:
    """What the supervisor logged while `action` ran and in the few polls after it."""
    start = len(replica.log.read_text())
    action()
    time.sleep(2.0)  # four supervisor polls
    return replica.log.read_text()[start:]


def serves(replica: Replica) -> bool:
    try:
        with TritonClient(replica.grpc_url, timeout_s=10) as client:
            return client.infer(MODEL, BATCH)["output"].shape == (1, 5)
    except ClientError:
        return False


def wait_serving(replica: Replica, seconds: float = 60.0) -> float:
    began = time.monotonic()
    while not serves(replica):
        assert time.monotonic() - began < seconds, f"not serving after {seconds:.0f} s:\n{replica.log.read_text()}"
        time.sleep(0.2)
    return time.monotonic() - began


def test_a_replaced_version_is_not_a_crash(replica: Replica) -> None:
    api = Api(replica)
    log = events_during(replica, lambda: (api.load([1]), api.load([2])))
    assert api.versions() == ["2"] and serves(replica)
    assert "reload" not in log and "restart" not in log, log


def test_an_unloaded_version_is_not_a_crash(replica: Replica) -> None:
    api = Api(replica)
    log = events_during(replica, lambda: (api.load([1, 2]), api.load([1])))
    assert api.versions() == ["1"] and serves(replica)
    assert "reload" not in log and "restart" not in log, log


def test_the_model_unloaded_and_loaded_again_is_not_a_crash(replica: Replica) -> None:
    api = Api(replica)
    log = events_during(
        replica, lambda: (api.call(f"/v2/repository/models/{MODEL}/unload", {}), time.sleep(2), api.load())
    )
    wait_serving(replica)
    assert "reload" not in log and "restart" not in log, log


def test_a_killed_stub_is_reloaded_with_the_versions_it_served(replica: Replica, report_figure) -> None:
    api = Api(replica)
    api.load([1])  # not the repository's latest
    wait_serving(replica)
    deadline = time.monotonic() + 30
    while len(stubs := _instance_stubs(replica)) != 1:  # the stub of the version replaced may still be ending
        assert time.monotonic() < deadline, stubs
        time.sleep(0.1)
    stub = stubs[0]
    start = len(replica.log.read_text())
    os.kill(stub, signal.SIGKILL)
    recovered = wait_serving(replica)
    log = replica.log.read_text()[start:]
    assert f"the backend stub of {MODEL} died; reloaded it" in log and "restart" not in log, log
    assert api.versions() == ["1"]  # the config it was served with, not the repository's latest
    report_figure(f"supervisor ({replica.http_url}): a killed stub reloaded, serving again after {recovered:.1f} s")


def test_an_aborted_tritonserver_is_restarted(replica: Replica) -> None:
    body = json.dumps(
        {"inputs": [{"name": "image", "shape": [16, 3, 100000, 100000], "datatype": "FP32", "data": [1.0]}]}
    )
    request = urllib.request.Request(f"{replica.http_url}/v2/models/{MODEL}/infer", data=body.encode())
    copies = {Path(cmdline(pid)[1]).parent.parent for pid in _instance_stubs(replica)}
    start = len(replica.log.read_text())
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(request, timeout=30)
    wait_serving(replica, 90)
    assert "restarting" in replica.log.read_text()[start:]
    temporary = {c for c in copies if c.parent == Path(tempfile.gettempdir())}  # object storage: Triton's copies
    assert not any(c.exists() for c in temporary), "the aborted server's model copies were left behind"


def test_stopping_leaves_no_temporary_model_copies(storage: tuple[str, Path]) -> None:
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("folder*"))
    served = start_replica(storage[0], storage[1], 1)
    assert serves(served)
    served.stop()
    assert set(temp.glob("folder*")) <= before


def _instance_stubs(replica: Replica) -> list[int]:
    return [
        pid
        for pid in descendants(replica.process.pid)
        if (argv := cmdline(pid)) and argv[0].endswith("triton_python_backend_stub") and f"{MODEL}_0_0" in argv
    ]
