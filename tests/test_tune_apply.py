"""`modelship tune NAME_pipeline --apply` on a real Triton: the pipeline is measured through (its step moved to each
candidate's artifact, TorchScript's tensor names included), the winner is written into the repository, a folder
(one journaled commit) or S3 (moto_server; each config one PUT, its listed versions kept), and `modelship parity
--served` still passes on the tuned pipeline."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from serve_exports import write_export

from modelship.serve.publish import PublishOptions, publish_export
from modelship.serve.s3_publish import publish_to_s3
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import parse_config
from modelship.serve.tune.apply import apply_winner
from modelship.serve.tune.space import Candidate
from modelship.testing.object_store import ObjectStore, moto_server
from tests.cli_contract import invoke

pytestmark = [pytest.mark.integration, pytest.mark.slow]
QUICK = ("--time-budget", "0.15", "--window", "0.15", "--max-concurrency", "4", "--p99-ms", "200")
ARTIFACTS = ["onnx", "torchscript"]
MODELS = ["tiny_onnx", "tiny_torchscript", "tiny_preprocess", "tiny_pipeline"]


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_export(tmp_path_factory.mktemp("tune-apply") / "tiny", fp16_io=False)


@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    with moto_server() as running:
        yield running


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six JPEGs of smooth colour and noise, for the pipeline to decode and preprocess."""
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for index in range(6):
        ramp = np.linspace(0, 255, 48)[None, :, None] * rng.uniform(0.2, 1.0, 3)
        pixels = np.broadcast_to(ramp, (40, 48, 3)) + rng.normal(0, 20, (40, 48, 3))
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / f"photo{index}.jpg", quality=90)
    return folder


def served_parity(export: Path, photos: Path, url: str, model: str) -> dict:
    args = ("--arch", "serve_exports:TinyNet", "--images", photos, "--served", url, "--served-model", model)
    result = invoke("parity", export, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["reports"][-1]


def tune(*args: object, default: str = "tiny_onnx") -> dict:
    result = invoke("tune", "tiny_pipeline", *QUICK, "--apply", "--json", *args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["pipeline"] == "tiny_pipeline" and payload["default"]["config"]["artifact"] == default
    measured = {p["config"]["artifact"] for p in payload["points"]}
    assert measured == {"tiny_onnx", "tiny_torchscript"} and not payload["skipped"]  # both served by the pipeline
    return payload


def test_a_pipeline_tuned_on_a_folder_is_applied_in_one_commit_and_passes_served_parity(
    export: Path, photos: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "model_repo"
    publish_export(export, repo, artifacts=ARTIFACTS)
    before = {p: p.read_text() for p in repo.glob("*/config.pbtxt")}
    payload = tune("--repo", repo, "--out", tmp_path / "report")
    after = {p: p.read_text() for p in repo.glob("*/config.pbtxt")}
    assert {str(p) for p in after if after[p] != before[p]} == set(payload["applied"])
    winner = payload["winner"]["config"]["artifact"]
    moved = str(repo / "tiny_pipeline" / "config.pbtxt") in payload["applied"]
    assert moved == (winner != "tiny_onnx") and payload["default_wins"] == (not payload["applied"])
    steps = [
        s.model_name for s in parse_config(after[repo / "tiny_pipeline" / "config.pbtxt"]).ensemble_scheduling.step
    ]
    assert steps == ["tiny_preprocess", winner]
    with TritonServer(repo, explicit_models=MODELS) as server:
        report = served_parity(export, photos, server.http_url, "tiny_pipeline")
        assert report["passed"] and report["candidate"] == "triton:tiny_pipeline"


def test_a_pipeline_tuned_through_url_is_applied_to_s3_keeping_its_versions(
    export: Path, photos: Path, store: ObjectStore, tmp_path: Path
) -> None:
    url = store.url("tuned")
    publish_to_s3(export, url, PublishOptions(artifacts=tuple(ARTIFACTS)))
    listed = {m: versions(store, m) for m in MODELS}
    with TritonServer(url, explicit_models=MODELS) as server:
        # TorchScript with other settings re-points the pipeline: served from the bucket, it still passes
        apply_winner(url, Candidate("tiny_torchscript", 2, 1, 16, 1000), "tiny_pipeline")
        with server.client() as client:
            client.load("tiny_torchscript")
            client.load("tiny_pipeline")
            assert client.model("tiny_pipeline").steps == ("tiny_preprocess", "tiny_torchscript")
        assert served_parity(export, photos, server.grpc_url, "tiny_pipeline")["passed"]
        config = parse_config(body(store, "tuned/tiny_torchscript/config.pbtxt"))
        assert config.instance_group[0].count == 2 and config.dynamic_batching.max_queue_delay_microseconds == 1000
        key = ("--api-key-file", server.api_key_file)
        payload = tune(
            "--url", server.http_url, *key, "--repo", url, "--out", tmp_path / "r", default="tiny_torchscript"
        )
        assert all(path.startswith(url) for path in payload["applied"])
        with server.client() as client:
            winner = payload["winner"]["config"]["artifact"]
            assert client.model("tiny_pipeline").steps == ("tiny_preprocess", winner)
    assert {m: versions(store, m) for m in MODELS} == listed


def body(store: ObjectStore, key: str) -> str:
    return store.client().get_object(Bucket=store.bucket, Key=key)["Body"].read().decode()


def versions(store: ObjectStore, model: str) -> list[int]:
    return list(parse_config(body(store, f"tuned/{model}/config.pbtxt")).version_policy.specific.versions)
