"""A rollout as an operator runs it, under load: three `modelship serve --model` replicas (their supervisors
watching) read one S3 bucket (moto_server); clients send requests to every replica the whole time while version 2
rolls out and then while a broken version 3 is withdrawn at the canary. Not one request fails, and no replica's
supervisor restarts its tritonserver or reloads a model (Triton stops old versions' stubs on purpose)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pytest
from fleet_support import MODEL, Replica, rollout, serving, start_replica
from serve_exports import SIZE, write_export

from modelship.contract.errors import ClientError
from modelship.serve.client import TritonClient
from modelship.testing.object_store import moto_server
from tests.cli_contract import invoke

pytestmark = [pytest.mark.integration, pytest.mark.slow]
MAX_REQUESTS = 200_000  # per replica; the traffic also stops when the test says so, and after MAX_SECONDS
MAX_SECONDS = 300.0


@dataclass
class Traffic:
    """Requests sent back to back to one replica from its own thread, bounded by count and time."""

    url: str
    sent: int = 0
    failed: list[str] = field(default_factory=list)


@contextmanager
def traffic(urls: list[str]) -> Iterator[list[Traffic]]:
    stop = threading.Event()
    tallies = [Traffic(url) for url in urls]
    batch = {"image": np.random.default_rng(0).standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)}

    def send(tally: Traffic) -> None:
        deadline = time.monotonic() + MAX_SECONDS
        with TritonClient(tally.url, timeout_s=30) as client:
            while not stop.is_set() and tally.sent < MAX_REQUESTS and time.monotonic() < deadline:
                tally.sent += 1
                try:
                    client.infer(MODEL, batch)
                except ClientError as exc:
                    tally.failed.append(str(exc))

    threads = [threading.Thread(target=send, args=(tally,), daemon=True) for tally in tallies]
    for thread in threads:
        thread.start()
    try:
        yield tallies
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("rollout-load")
    good = write_export(root / "good" / "tiny")
    broken = write_export(root / "broken" / "tiny", seed=7)
    with moto_server() as store:
        url = store.url("fleet")
        for version, export in ((1, good), (2, good), (3, broken)):
            args = ("--artifact", "onnx", "--pipeline-artifact", "none", "--version", version, "--keep-versions", 1)
            assert invoke("publish", export, "--repo", url, *args, "--json").exit_code == 0
        replicas = []
        try:
            for index in range(3):
                replicas.append(start_replica(url, root, index))
            yield {"good": good, "servers": replicas, "keys": [r.api_key_file for r in replicas]}
        finally:
            for replica in replicas:
                replica.stop()


def test_a_rollout_and_a_rollback_under_load_fail_no_request(fleet: dict, report_figure) -> None:
    replicas: list[Replica] = fleet["servers"]
    urls = [r.http_url for r in replicas[:2]] + [replicas[2].grpc_url]
    began = time.perf_counter()
    with traffic(urls) as tallies:
        time.sleep(1)
        code, result = rollout(fleet, 2)
        assert code == 0, result
        rolled = time.perf_counter() - began
        code, result = rollout(fleet, 3, "--canary", 1)  # broken: withdrawn from the canary, the others untouched
        assert code == 1 and result["servers"][0]["final"] == "rolled back to [2]", result
        time.sleep(1)
    seconds = time.perf_counter() - began
    for tally in tallies:
        assert tally.sent > 10 and not tally.failed, f"{tally.url}: {len(tally.failed)} failed: {tally.failed[:3]}"
    assert [serving(r) for r in replicas] == [["2"]] * 3
    for replica in replicas:
        with TritonClient(replica.grpc_url) as client:
            assert client.infer(MODEL, {"image": np.zeros((2, 3, SIZE, SIZE), np.float32)})["output"].shape == (2, 5)
        supervisor = replica.log.read_text()
        assert "restarting" not in supervisor and "reload" not in supervisor, supervisor
    sent = sum(t.sent for t in tallies)
    report_figure(
        f"rollout under load: 3 S3-served replicas, rollout 1 -> 2 in {rolled:.1f} s, then a canary rollback; "
        f"{sent} requests in {seconds:.1f} s ({', '.join(str(t.sent) for t in tallies)} per replica), 0 failed, "
        "no restart, no reload"
    )
