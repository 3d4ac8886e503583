"""Publishing into a model repository: layout, versions, verification, safety against kills and concurrency."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from serve_exports import LABELS, PREPROCESS, write_export

from modelship.contract.errors import PublishError
from modelship.contract.manifest import Manifest
from modelship.serve.publish import publish_export
from modelship.serve.repository import staging_root
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import ServingOptions, parse_config

REPO_ROOT = Path(__file__).resolve().parents[1]
SLOW_CLI = (sys.executable, str(Path(__file__).with_name("slow_cli.py")))


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_export(tmp_path_factory.mktemp("exports") / "tiny")


def assert_loadable(repo: Path) -> None:
    """What Triton needs of every model folder: a parseable config and at least one complete version."""
    for model in (p for p in repo.iterdir() if p.is_dir()):
        config = parse_config((model / "config.pbtxt").read_text(), str(model))
        assert config.name == model.name
        versions = [v for v in model.iterdir() if v.is_dir() and v.name.isdigit()]  # not warmup/
        assert versions, model
        for version in versions:
            if config.platform == "ensemble":
                continue  # its version folder is empty
            if config.backend == "python":
                assert (version / "model.py").is_file() and (version / "preprocess.json").is_file()
                continue
            record = json.loads((version / "modelship.json").read_text())
            assert (version / config.default_model_filename).stat().st_size > 0
            assert record["published"]["version"] == int(version.name)


def publish_cli(export_dir: Path, repo: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [*SLOW_CLI, "publish", str(export_dir), "--repo", str(repo), "--json", *args],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_layout_and_files(export_dir: Path, tmp_path: Path) -> None:
    result = publish_export(export_dir, tmp_path / "repo")
    artifacts = ["tiny_torchscript", "tiny_torchscript_fp16", "tiny_onnx", "tiny_onnx_fp16"]  # the export's order
    assert result.names == [*artifacts, "tiny_preprocess", "tiny_pipeline"]
    model = tmp_path / "repo" / "tiny_torchscript"
    assert sorted(p.name for p in model.iterdir()) == ["1", "config.pbtxt", "labels.txt", "preprocess.json"]
    assert sorted(p.name for p in (model / "1").iterdir()) == ["model.pt", "modelship.json"]
    assert (model / "labels.txt").read_text().split() == LABELS
    assert json.loads((model / "preprocess.json").read_text()) == PREPROCESS.to_dict()
    record = Manifest.from_dict(json.loads((model / "1" / "modelship.json").read_text()))
    assert [a.name for a in record.artifacts] == ["torchscript"]
    assert record.artifacts[0].sha256 == Manifest.read(export_dir).artifact("torchscript").sha256
    assert_loadable(tmp_path / "repo")
    assert not staging_root(tmp_path / "repo").exists()


def test_republish_adds_a_version_and_keeps_the_old_one(export_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    first = publish_export(export_dir, repo, artifacts=["onnx"])
    old = (repo / "tiny_onnx" / "1" / "model.onnx").stat()
    second = publish_export(export_dir, repo, artifacts=["onnx"])
    assert [m.version for m in first.models + second.models if m.name == "tiny_onnx"] == [1, 2]
    assert [m.version for m in second.models] == [2, 2, 2]  # the preprocess model and the pipeline too
    assert (repo / "tiny_onnx" / "1" / "model.onnx").stat().st_mtime_ns == old.st_mtime_ns
    assert publish_export(export_dir, repo, artifacts=["onnx"], version=7).models[0].version == 7
    assert publish_export(export_dir, repo, artifacts=["onnx"]).models[0].version == 8
    with pytest.raises(PublishError, match="already exists"):
        publish_export(export_dir, repo, artifacts=["onnx"], version=2)
    assert_loadable(repo)


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden", "", "x" * 200, "sp ace", "..", "a..b"])
def test_unsafe_model_names_are_refused(export_dir: Path, tmp_path: Path, name: str) -> None:
    with pytest.raises(PublishError, match="not a safe folder name"):
        publish_export(export_dir, tmp_path / "repo", name=name)
    assert not (tmp_path / "repo").exists() or not any((tmp_path / "repo").iterdir())


def test_a_file_changed_after_export_is_refused(export_dir: Path, tmp_path: Path) -> None:
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for path in export_dir.iterdir():
        (tampered / path.name).write_bytes(path.read_bytes())
    with open(tampered / "model.onnx", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(PublishError, match="does not match the manifest"):
        publish_export(tampered, tmp_path / "repo", artifacts=["onnx"])
    assert not (tmp_path / "repo" / "tiny_onnx").exists()


def test_unknown_artifact_and_wrong_label_count_are_refused(export_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(PublishError, match="no artifact 'onnx_int8'"):
        publish_export(export_dir, tmp_path / "repo", artifacts=["onnx_int8"])
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\n")
    with pytest.raises(PublishError, match="2 labels for output 'output' of 5 classes"):
        publish_export(export_dir, tmp_path / "repo", labels=labels)


def test_incompatible_io_refused_when_several_versions_are_served(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    publish_export(write_export(tmp_path / "a", "m"), repo, artifacts=["onnx"], serving=ServingOptions(keep_versions=2))
    fp16 = write_export(tmp_path / "b", "m")
    manifest = Manifest.read(fp16)
    manifest.artifacts = [manifest.artifact("onnx_fp16")]
    manifest.artifacts[0].name = "onnx"
    manifest.write(fp16)
    with pytest.raises(PublishError, match="inputs/outputs differ"):
        publish_export(fp16, repo, serving=ServingOptions(keep_versions=2))
    assert publish_export(fp16, repo).models[0].version == 2  # fine when only the latest version is served


@pytest.mark.slow
def test_two_concurrent_publishers_get_distinct_versions(export_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    # each pauses mid-copy while holding the lock, so the second one must wait for the first
    args = ("--artifact", "onnx", "--artifact", "torchscript")
    procs = [publish_cli(export_dir, repo, *args, env={"SLOW_COPY_S": "0.3"}) for _ in range(2)]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(r["ok"] for r in results), results
    for model in ("tiny_onnx", "tiny_torchscript"):
        versions = sorted(m["version"] for r in results for m in r["models"] if m["name"] == model)
        assert versions == [1, 2]
    assert_loadable(repo)


@pytest.mark.slow
@pytest.mark.integration
def test_a_killed_publisher_leaves_the_repository_loadable(export_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    publish_export(export_dir, repo, artifacts=["onnx"])
    proc = publish_cli(export_dir, repo, "--artifact", "onnx", env={"SLOW_COPY_S": "60"})
    staged = staging_root(repo)
    deadline = time.monotonic() + 60
    while not any(p.name == "model.onnx" for p in staged.rglob("*")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # staged, not yet committed
    proc.wait()
    assert sorted(p.name for p in (repo / "tiny_onnx").iterdir() if p.is_dir()) == ["1"]
    assert_loadable(repo)
    with TritonServer(repo) as server, server.client() as client:  # the real thing loads it
        assert client.ready()
    assert publish_export(export_dir, repo, artifacts=["onnx"]).models[0].version == 2
    assert not staged.exists()
