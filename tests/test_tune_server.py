"""`modelship tune` on a real Triton: a `modelship serve` started from another process, tuned through --url with
its secret; a tune killed mid-search while a client queries the model the whole time (not one request fails, and
the next tune restores the config it left); a local server started by tune itself from --repo; the bad inputs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fleet_support import MODEL, Replica, start_replica
from serve_exports import SIZE, write_export

from modelship.contract.errors import ClientError
from modelship.serve.client import TritonClient
from modelship.serve.publish import publish_export
from modelship.serve.triton_config import parse_config
from modelship.serve.tune.restore import journal_path
from tests.cli_contract import expect_failure, invoke
from tests.processes import kill_when

pytestmark = [pytest.mark.integration, pytest.mark.slow]
QUICK = ("--time-budget", "0.1", "--window", "0.15", "--max-concurrency", "4")
TUNE = (sys.executable, "-c", "from modelship.cli.main import main; main()", "tune")


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state folder of the module's own (tune's journals, the servers' secrets)."""
    folder = tmp_path_factory.mktemp("state")
    previous = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("XDG_RUNTIME_DIR")
    else:
        os.environ["XDG_RUNTIME_DIR"] = previous


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tune")
    folder = root / "model_repo"
    publish_export(write_export(root / "tiny"), folder, artifacts=["onnx", "onnx_fp16"], pipeline=None)
    return folder


@pytest.fixture(scope="module")
def replica(repo: Path, state: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    served = start_replica(str(repo), tmp_path_factory.mktemp("replica"), 0, MODEL, "tiny_onnx_fp16")
    yield served
    served.stop()


def config_of(replica: Replica) -> dict:
    with TritonClient(replica.http_url, api_key=replica.api_key_file.read_text().strip()) as client:
        return client.model_config(MODEL)


def changed(replica: Replica, journal: Path) -> list[str]:
    """The models whose config differs from the one tune's journal recorded before changing it."""
    try:
        recorded = json.loads(journal.read_text())["models"]
    except (OSError, ValueError):  # no journal yet, or read while it is replaced
        return []
    with TritonClient(replica.http_url, api_key=replica.api_key_file.read_text().strip()) as client:
        return [model for model, config in recorded.items() if client.model_config(model) != config]


def test_a_served_model_is_tuned_through_url_with_the_secret_and_its_config_restored(
    replica: Replica, tmp_path: Path
) -> None:
    before = config_of(replica)
    out = tmp_path / "report"
    args = ("tune", MODEL, "--url", replica.http_url, "--api-key-file", replica.api_key_file, "--p99-ms", 200)
    result = invoke(*args, *QUICK, "--time-budget", "0.3", "--out", out, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] and payload["model"] == MODEL and payload["points_measured"] >= 2
    assert payload["default"]["config"]["artifact"] == MODEL
    assert {p["config"]["artifact"] for p in payload["points"]} <= {MODEL, "tiny_onnx_fp16"}
    assert all(p["windows"] >= 3 and p["client_cpu"] > 0 for p in payload["points"])
    assert (out / "tune.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "tune.json").read_text())["points"] == payload["points"]
    assert len({json.dumps(p["config"]) for p in payload["points"]}) > 1  # configs were changed...
    assert payload["restored"] and config_of(replica) == before  # ...and put back
    assert not journal_path(replica.http_url).exists()


def test_a_tune_killed_mid_search_is_undone_by_the_next_and_no_request_fails(replica: Replica, tmp_path: Path) -> None:
    before = config_of(replica)
    journal = journal_path(replica.http_url)
    stop, sent, failed = threading.Event(), [0], []
    batch = {"image": np.random.default_rng(0).standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)}

    def query() -> None:
        with TritonClient(replica.http_url, timeout_s=30) as client:
            while not stop.is_set():
                sent[0] += 1
                try:
                    client.infer(MODEL, batch)
                except ClientError as exc:
                    failed.append(str(exc))

    client_thread = threading.Thread(target=query, daemon=True)
    client_thread.start()
    try:
        key = ("--api-key-file", str(replica.api_key_file))
        args = [*TUNE, MODEL, "--url", replica.http_url, *key, "--p99-ms", "200", "--out", str(tmp_path / "a")]
        slow = ["--window", "0.15", "--max-concurrency", "4", "--time-budget", "5"]
        tuning = subprocess.Popen([*args, *slow], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        kill_when(tuning, lambda: bool(changed(replica, journal)))
        assert tuning.wait(timeout=30) == -signal.SIGKILL
        left = changed(replica, journal)
        assert left  # the kill left a changed config behind
        result = invoke("tune", MODEL, "--url", replica.http_url, *key, "--p99-ms", 200, *QUICK, "--json",
                        "--out", tmp_path / "b")  # fmt: skip
        assert result.exit_code == 0, result.output
        assert set(left) <= set(json.loads(result.stdout)["recovered"])
        assert config_of(replica) == before and not journal.exists() and not changed(replica, journal)
    finally:
        stop.set()
        client_thread.join(timeout=60)
    assert sent[0] > 0 and failed == []


def test_tune_starts_its_own_server_on_a_repository_folder_and_applies_the_winner(
    repo: Path, state: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "model_repo"
    shutil.copytree(repo, mine)
    before = {p: p.read_text() for p in mine.glob("*/config.pbtxt")}
    result = invoke("tune", MODEL, "--repo", mine, "--p99-ms", 200, *QUICK, "--out", tmp_path / "r", "--apply")
    assert result.exit_code == 0, result.output
    assert "every point measured" in result.stdout and "tune.png" in result.stdout
    assert "starting a local Triton" in result.stderr
    payload = json.loads((tmp_path / "r" / "tune.json").read_text())
    after = {p: p.read_text() for p in mine.glob("*/config.pbtxt")}
    assert not (tmp_path / ".model_repo.staging").exists()
    if payload["default_wins"]:
        assert payload["applied"] == [] and after == before and "the default wins" in result.stdout
        return
    winner = payload["winner"]["config"]
    written = mine / winner["artifact"] / "config.pbtxt"
    assert payload["applied"] == [str(written)] and [p for p in after if after[p] != before[p]] == [written]
    config = parse_config(written.read_text())
    assert config.instance_group[0].count == winner["instances"]
    assert config.parameters["intra_op_thread_count"].string_value == str(winner["threads"])
    assert config.max_batch_size == winner["max_batch_size"]
    assert config.dynamic_batching.max_queue_delay_microseconds == winner["queue_delay_us"]


def test_bad_inputs_are_one_line_each(repo: Path, replica: Replica, state: Path, tmp_path: Path) -> None:
    key = ("--api-key-file", replica.api_key_file)
    expect_failure(["tune", "nope", "--repo", repo, "--p99-ms", 100, "--out", tmp_path], names=["nope", MODEL])
    expect_failure(["tune", MODEL, "--url", "http://127.0.0.1:9", *key, "--p99-ms", 100], names=["127.0.0.1:9"])
    expect_failure(["tune", MODEL, "--url", replica.http_url, "--p99-ms", 100], names=["--api-key-file"])
    expect_failure(["tune", MODEL, "--repo", repo, "--p99-ms", 0], names=["p99"], code=2)
    expect_failure(["tune", MODEL, "--url", replica.http_url, *key, "--p99-ms", 9, "--apply", "--repo", tmp_path],
                   names=["--apply", "--repo"], code=2)  # fmt: skip
    expect_failure(
        ["tune", MODEL, "--url", replica.http_url, *key, "--p99-ms", 0.001, *QUICK, "--out", tmp_path / "x"],
        names=["no config", "the closest", "--p99-ms"],
    )
    assert config_of(replica)["instance_group"][0]["count"] == 1
