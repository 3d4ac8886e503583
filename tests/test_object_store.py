"""Model repositories in S3-compatible object storage, against a real S3 HTTP server (moto_server): publish
uploads and verifies a version before the config that makes it visible; tritonserver serves straight from the
bucket; a publisher killed at any point never leaves a visible partial version; concurrent publishers get distinct
versions; bad locations fail fast with one line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from serve_exports import write_export

from modelship.serve.client import TritonClient
from modelship.serve.ports import free_port
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import parse_config
from modelship.testing.object_store import ObjectStore, moto_server
from tests.cli_contract import invoke
from tests.processes import kill_when

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[1]
SLOW_CLI = (sys.executable, str(Path(__file__).with_name("slow_cli.py")))


@pytest.fixture(scope="module")
def store():
    with moto_server() as running:
        yield running


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_export(tmp_path_factory.mktemp("s3") / "tiny")


def publish(export_dir: Path, url: str, *args: object) -> dict:
    result = invoke("publish", export_dir, "--repo", url, "--artifact", "onnx", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def objects(store: ObjectStore, prefix: str) -> dict[str, dict]:
    s3 = store.client()
    found = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            found[item["Key"][len(prefix) + 1 :]] = item
    return found


def assert_consistent(store: ObjectStore, prefix: str) -> dict[str, list[int]]:
    """What a reader may load: every version a config lists is complete (each object there, sha256 as recorded).
    Returns the listed versions per model."""
    s3 = store.client()
    keys = objects(store, prefix)
    listed = {}
    for key in (k for k in keys if k.endswith("/config.pbtxt")):
        model = key.split("/")[0]
        body = s3.get_object(Bucket=store.bucket, Key=f"{prefix}/{key}")["Body"].read().decode()
        versions = list(parse_config(body).version_policy.specific.versions)
        assert versions, model
        for version in versions:
            files = [k for k in keys if k.startswith(f"{model}/{version}/")]
            assert files, (model, version)
            for name in files:
                head = s3.head_object(Bucket=store.bucket, Key=f"{prefix}/{name}")
                data = s3.get_object(Bucket=store.bucket, Key=f"{prefix}/{name}")["Body"].read()
                assert head["Metadata"]["sha256"] == hashlib.sha256(data).hexdigest(), name
        listed[model] = versions
    return listed


def test_publish_uploads_versions_and_serve_reads_the_bucket(store: ObjectStore, export_dir: Path) -> None:
    url = store.url("served")
    first = publish(export_dir, url)
    assert {m["name"]: m["version"] for m in first["models"]} == {
        "tiny_onnx": 1, "tiny_preprocess": 1, "tiny_pipeline": 1,
    }  # fmt: skip
    second = publish(export_dir, url)
    assert {m["version"] for m in second["models"]} == {2}
    assert assert_consistent(store, "served") == {"tiny_onnx": [2], "tiny_preprocess": [2], "tiny_pipeline": [2]}
    assert "tiny_onnx/1/model.onnx" in objects(store, "served")  # older versions stay, unlisted
    with TritonServer(url) as server, TritonClient(server.http_url) as client:
        batch = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
        assert client.infer("tiny_onnx", {"image": batch})["output"].shape == (2, 5)
        assert client.model("tiny_onnx").versions == ("2",)


@pytest.mark.parametrize(
    ("model", "listed"),
    [
        ("tiny_onnx", {"tiny_onnx": [1], "tiny_preprocess": [1], "tiny_pipeline": [1]}),
        ("tiny_preprocess", {"tiny_onnx": [2], "tiny_preprocess": [1], "tiny_pipeline": [1]}),
    ],
    ids=["in the first model", "in the second model"],
)
def test_a_killed_publisher_never_leaves_a_visible_partial_version(
    store: ObjectStore, export_dir: Path, model: str, listed: dict[str, list[int]]
) -> None:
    """Killed as soon as the first object of `model`'s version 2 is uploaded (the next waits SLOW_PUT_S): that version
    stays unlisted, the models uploaded before it list theirs, and the next publisher skips number 2."""
    url, prefix = store.url(f"killed-{model}"), f"killed-{model}"
    publish(export_dir, url)
    process = subprocess.Popen(
        [*SLOW_CLI, "publish", str(export_dir), "--repo", url, "--artifact", "onnx", "--json"],
        cwd=REPO_ROOT,
        env={**os.environ, "SLOW_PUT_S": "0.5"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    s3, started = store.client(), f"{prefix}/{model}/2/"
    kill_when(process, lambda: s3.list_objects_v2(Bucket=store.bucket, Prefix=started)["KeyCount"] > 0)
    partial, whole = objects(store, f"{prefix}/{model}/2"), objects(store, f"{prefix}/{model}/1")
    assert 0 < len(partial) < len(whole), f"the kill did not land inside version 2 of {model}: {sorted(partial)}"
    assert assert_consistent(store, prefix) == listed
    after = publish(export_dir, url)  # the dead publisher's lock is taken over; its version number is not reused
    assert {m["version"] for m in after["models"]} == {3}
    assert assert_consistent(store, prefix) == {name: [3] for name in listed}


def test_concurrent_publishers_get_distinct_versions(store: ObjectStore, export_dir: Path) -> None:
    url = store.url("racing")
    args = [*SLOW_CLI, "publish", str(export_dir), "--repo", url, "--artifact", "onnx", "--pipeline-artifact", "none"]
    procs = [
        subprocess.Popen([*args, "--json"], cwd=REPO_ROOT, env={**os.environ, "SLOW_PUT_S": "0.1"},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert sorted(r["models"][0]["version"] for r in results) == [1, 2]
    assert assert_consistent(store, "racing") == {"tiny_onnx": [2]}


@pytest.mark.parametrize(
    ("location", "needles"),
    [
        ("s3://{endpoint}/no-such-bucket/x", ["no-such-bucket", "does not exist"]),
        ("s3://{endpoint}/Models/x", ["'Models'", "lowercase"]),
        ("s3://127.0.0.1:{closed}/models/x", ["cannot reach", "127.0.0.1"]),
    ],
    ids=["unknown bucket", "uppercase bucket", "unreachable endpoint"],
)
def test_bad_locations_fail_fast_with_one_line(
    store: ObjectStore, export_dir: Path, location: str, needles: list[str]
) -> None:
    url = location.format(endpoint=store.endpoint.split("://")[1], closed=free_port())
    began = time.monotonic()
    result = invoke("publish", export_dir, "--repo", url, "--json")
    assert result.exit_code == 1 and time.monotonic() - began < 30
    error = json.loads(result.stdout)["error"]
    assert all(n in error for n in needles), error
    assert "Traceback" not in result.output


def test_missing_credentials_and_a_taken_version_are_refused(
    store: ObjectStore, export_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = store.url("versions")
    publish(export_dir, url)
    taken = invoke("publish", export_dir, "--repo", url, "--artifact", "onnx", "--version", "1", "--json")
    assert taken.exit_code == 1 and "already present" in json.loads(taken.stdout)["error"]
    assert assert_consistent(store, "versions")["tiny_onnx"] == [1]
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    anonymous = invoke("publish", export_dir, "--repo", url, "--json")
    assert anonymous.exit_code == 1 and "AWS_ACCESS_KEY_ID" in json.loads(anonymous.stdout)["error"]
