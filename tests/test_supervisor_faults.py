"""`modelship serve`'s supervisor on a local folder and on object storage (moto_server) alike: a crashed stub is
reloaded (with the versions it served), an aborted tritonserver restarted, while what Triton does on purpose
(a version unloaded or replaced, the model unloaded and loaded again through the repository API) is left alone.
Stopping leaves no temporary model copies behind.

Nothing here sleeps to mean "nothing happened": the supervisor logs when it starts watching a stub and its verdict
once that stub is gone, and the tests wait for those lines (bounded), then read what it decided.
"""

from __future__ import annotations

import json
import os
import re
import signal
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
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
WATCHING = re.compile(r"backend stub (\d+) \(.*\): watching$", re.M)
CLOSED = re.compile(r"backend stub (\d+) \(.*\) (?:ended|died)\b", re.M)
STUB = "triton_python_backend_stub"
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


def settle(replica: Replica, versions: list[str], timeout_s: float = 60.0) -> None:
    """Wait until the model's instance stubs serve `versions` (one each), the supervisor watches every stub alive
    and has given its verdict on every stub it watched that is gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        stubs = _stubs(replica)
        log = replica.log.read_text()
        watched, closed = {int(p) for p in WATCHING.findall(log)}, {int(p) for p in CLOSED.findall(log)}
        served = sorted(Path(argv[1]).parent.name for argv in stubs.values() if _instance(argv))
        if served == versions and set(stubs) <= watched and watched - set(stubs) <= closed:
            return
        assert time.monotonic() < deadline, f"not settled on {versions} (stubs: {served}) in {timeout_s:.0f} s:\n{log}"
        time.sleep(0.1)


def events_during(replica: Replica, *steps: tuple[Callable[[], object], list[str]]) -> str:
    """What the supervisor logged while each (action, versions it leaves served) step ran and until it settled."""
    settle(replica, Api(replica).versions())
    start = len(replica.log.read_text())
    for action, versions in steps:
        action()
        settle(replica, versions)
    return replica.log.read_text()[start:]


def wait_line(replica: Replica, start: int, text: str, seconds: float = 90.0) -> str:
    """The supervisor's log since offset `start`, once it holds `text`."""
    deadline = time.monotonic() + seconds
    while text not in (log := replica.log.read_text()[start:]):
        assert time.monotonic() < deadline, f"no {text!r} in {seconds:.0f} s:\n{log}"
        time.sleep(0.1)
    return log


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


def assert_left_alone(log: str, unloaded: int) -> None:
    """`unloaded` instance stubs ended with their version, and nothing died, was reloaded or restarted."""
    verdicts = [line for line in log.splitlines() if f"({MODEL}_0_0, " in line and CLOSED.search(line)]
    assert len(verdicts) == unloaded and all("Triton unloaded its version" in v for v in verdicts), log
    assert "died" not in log and "reload" not in log and "restart" not in log, log


def test_a_replaced_version_is_not_a_crash(replica: Replica) -> None:
    api = Api(replica)
    log = events_during(replica, (lambda: api.load([1]), ["1"]), (lambda: api.load([2]), ["2"]))
    assert api.versions() == ["2"] and serves(replica)
    assert_left_alone(log, unloaded=2)


def test_an_unloaded_version_is_not_a_crash(replica: Replica) -> None:
    api = Api(replica)
    log = events_during(replica, (lambda: api.load([1, 2]), ["1", "2"]), (lambda: api.load([1]), ["1"]))
    assert api.versions() == ["1"] and serves(replica)
    assert_left_alone(log, unloaded=1)


def test_the_model_unloaded_and_loaded_again_is_not_a_crash(replica: Replica) -> None:
    api = Api(replica)
    unload = (lambda: api.call(f"/v2/repository/models/{MODEL}/unload", {}), [])
    log = events_during(replica, unload, (api.load, ["2"]))
    wait_serving(replica)
    assert_left_alone(log, unloaded=1)


def test_a_killed_stub_is_reloaded_with_the_versions_it_served(replica: Replica, report_figure) -> None:
    api = Api(replica)
    api.load([1])  # not the repository's latest
    settle(replica, ["1"])  # the supervisor watches its stub
    (stub,) = _instance_stubs(replica)
    start = len(replica.log.read_text())
    began = time.monotonic()
    os.kill(stub, signal.SIGKILL)
    log = wait_line(replica, start, f"the backend stub of {MODEL} died; reloaded it")
    wait_serving(replica)
    recovered = time.monotonic() - began
    assert f"backend stub {stub} ({MODEL}_0_0, version 1) died" in log and "restart" not in log, log
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
    log = wait_line(replica, start, "tritonserver ready again")
    wait_serving(replica)
    assert "restarting" in log, log
    temporary = {c for c in copies if c.parent == Path(tempfile.gettempdir())}  # object storage: Triton's copies
    assert not any(c.exists() for c in temporary), "the aborted server's model copies were left behind"


def test_stopping_leaves_no_temporary_model_copies(storage: tuple[str, Path]) -> None:
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("folder*"))
    served = start_replica(storage[0], storage[1], 1)
    assert serves(served)
    served.stop()
    assert set(temp.glob("folder*")) <= before


def _stubs(replica: Replica) -> dict[int, list[str]]:
    """The replica's backend stubs now, with their command lines."""
    return {pid: argv for pid in descendants(replica.process.pid) if (argv := cmdline(pid)) and argv[0].endswith(STUB)}


def _instance(argv: list[str]) -> bool:
    """Whether the stub runs the model's (only) instance."""
    return f"{MODEL}_0_0" in argv


def _instance_stubs(replica: Replica) -> list[int]:
    return [pid for pid, argv in _stubs(replica).items() if _instance(argv)]
