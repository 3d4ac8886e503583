"""A fleet: three real tritonservers on loopback, all reading one S3 repository (moto_server) in explicit mode.
`modelship rollout` brings a new version to every server proven by served parity, withdraws a broken version
everywhere, and returns the others when a server dies mid-rollout. Each test starts from the fleet as it started
(the `fleet` fixture), so any one runs alone or in any order."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml
from fleet_support import MODEL, rollout, serving
from serve_exports import write_export

from modelship.serve.server import TritonServer
from modelship.testing.object_store import moto_server
from tests.cli_contract import invoke

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("fleet")
    good = write_export(root / "good" / "tiny")
    broken = write_export(root / "broken" / "tiny", seed=7)  # same name and I/O, other weights
    with moto_server() as store:
        url = store.url("fleet")
        for version, export in ((1, good), (2, good), (3, broken)):
            args = ("--artifact", "onnx", "--pipeline-artifact", "none", "--version", version, "--keep-versions", 1)
            assert invoke("publish", export, "--repo", url, *args, "--json").exit_code == 0
        servers = [TritonServer(url, explicit_models=[MODEL]) for _ in range(3)]
        try:
            for server in servers:
                server.start()
            yield {"good": good, "servers": servers, "url": url}
        finally:
            for server in servers:
                server.stop()


@pytest.fixture
def fleet(cluster: dict) -> dict:
    """The fleet as it starts, whatever the test before did: every server running (a stopped one started again)
    and serving the versions the repository's config lists."""
    for server in cluster["servers"]:
        if server.running:
            with server.client() as client:
                client.reload(MODEL)
        else:
            server.start()
    return {**cluster, "keys": [server.api_key_file for server in cluster["servers"]]}


def test_the_fleet_serves_the_newest_published_version(fleet: dict) -> None:
    assert [serving(s) for s in fleet["servers"]] == [["3"]] * 3  # the config lists the latest: version 3


def test_rollout_brings_a_good_version_to_every_server(fleet: dict) -> None:
    code, result = rollout(fleet, 2)
    assert code == 0, result
    assert [s["parity"] for s in result["servers"]] == ["PASS"] * 3
    assert [serving(s) for s in fleet["servers"]] == [["2"]] * 3


def test_a_broken_version_is_withdrawn_at_the_canary(fleet: dict) -> None:
    assert rollout(fleet, 2)[0] == 0
    code, result = rollout(fleet, 3, "--canary", 1)
    assert code == 1
    first, *others = result["servers"]
    assert first["parity"].startswith("FAIL") and first["final"] == "rolled back to [2]"
    assert [o["final"] for o in others] == ["unchanged", "unchanged"]
    assert [serving(s) for s in fleet["servers"]] == [["2"]] * 3


def test_a_server_dying_mid_rollout_is_reported_and_the_others_rolled_back(fleet: dict) -> None:
    servers = fleet["servers"]
    assert rollout(fleet, 2)[0] == 0

    def kill_the_last_once_the_first_is_done() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and serving(servers[0]) != ["1"]:
            time.sleep(0.05)
        servers[2].stop()

    killer = threading.Thread(target=kill_the_last_once_the_first_is_done)
    killer.start()
    code, result = rollout(fleet, 1)
    killer.join()
    assert code == 1
    dead = result["servers"][2]
    assert dead["parity"] != "PASS" and "cannot reach a triton server" in (dead["error"] or dead["parity"]).lower()
    assert "rolled back" in result["servers"][0]["final"], json.dumps(result)
    assert [serving(s) for s in servers[:2]] == [["2"]] * 2


def test_a_server_that_is_not_triton_is_refused_before_anything_changes(cluster: dict) -> None:
    args = ["rollout", MODEL, "--version", 1, "--export", cluster["good"], "--server", "http://127.0.0.1:9", "--json"]
    result = invoke(*args)
    assert result.exit_code == 1 and "does not answer as a Triton server" in json.loads(result.stdout)["error"]


def test_kserve_manifests_read_the_same_bucket(cluster: dict, tmp_path: Path) -> None:
    out = tmp_path / "kserve.yaml"
    result = invoke("deploy", "kserve", MODEL, "--repo", cluster["url"], "--out", out, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    secret, account, service = yaml.safe_load_all(out.read_text())
    assert secret["stringData"] == {"AWS_ACCESS_KEY_ID": "<set me>", "AWS_SECRET_ACCESS_KEY": "<set me>"}
    assert secret["metadata"]["annotations"]["serving.kserve.io/s3-endpoint"].startswith("127.0.0.1:")
    assert account["secrets"] == [{"name": secret["metadata"]["name"]}]
    triton = service["spec"]["predictor"]["triton"]
    assert triton["storageUri"] == "s3://models/fleet" and f"--load-model={MODEL}" in triton["args"]
    probe = triton["startupProbe"]
    assert (
        0 < data["load_seconds"] < 60 and probe["failureThreshold"] * probe["periodSeconds"] >= 3 * data["load_seconds"]
    )
