"""`modelship serve` as a user runs it: ready JSON on stdout, endpoints that answer, clean exit on SIGTERM/Ctrl-C."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from serve_exports import write_export

from modelship.serve.client import TritonClient
from modelship.serve.publish import publish_export
from tests.cli_contract import port_flags

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[1]
SERVE = (sys.executable, "-c", "from modelship.cli.main import main; main()", "serve", "--json", "--repo")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve_cmd")
    publish_export(write_export(root / "tiny"), root / "repo", artifacts=["onnx"], pipeline=None)
    return root / "repo"


def start(repo: Path, *extra: str) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [*SERVE, str(repo), *port_flags(), *extra],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    for line in proc.stdout:  # the one JSON object, printed once the server is ready
        lines.append(line)
        if line.startswith("}"):
            break
    assert lines, proc.stderr.read()
    return proc, json.loads("".join(lines))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_reports_endpoints_and_stops_on_signal(repo: Path, sig: signal.Signals) -> None:
    proc, ready = start(repo)
    try:
        assert ready["ok"] and ready["http"].startswith("http://127.0.0.1:")
        assert [m["name"] for m in ready["models"]] == ["tiny_onnx"]
        assert "tritonserver --model-repository=/models" in ready["production_command"]
        assert Path(ready["log_file"]).is_file()
        with TritonClient(ready["grpc"]) as client:
            assert client.live()
    finally:
        proc.send_signal(sig)
        code = proc.wait(timeout=30)
    assert code == 0, proc.stderr.read()
    with TritonClient(ready["http"]) as client:
        assert not client.live()


def test_serve_fails_clearly_when_the_port_is_taken(repo: Path) -> None:
    proc, ready = start(repo)
    try:
        port = ready["http"].rsplit(":", 1)[1]
        clash = subprocess.run(
            [*SERVE, str(repo), *port_flags(http=port)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    payload = json.loads(clash.stdout)
    assert clash.returncode == 1 and payload["ok"] is False
    assert payload["error"].startswith(f"http port {port} on 127.0.0.1 is already in use")


@pytest.fixture
def mixed_repo(tmp_path: Path) -> Path:
    """A good model beside a garbage model.onnx, an unparsable config.pbtxt and a stray empty numeric folder."""
    repo = tmp_path / "repo"
    publish_export(write_export(tmp_path / "tiny"), repo, artifacts=["onnx"], pipeline=None)
    shutil.copytree(repo / "tiny_onnx", repo / "garbage")
    (repo / "garbage" / "1" / "model.onnx").write_bytes(b"not an onnx file")
    config = (repo / "tiny_onnx" / "config.pbtxt").read_text().replace('"tiny_onnx"', '"garbage"')
    (repo / "garbage" / "config.pbtxt").write_text(config)
    (repo / "unparsable").mkdir()
    (repo / "unparsable" / "config.pbtxt").write_text("input { this is not")
    (repo / "7").mkdir()
    return repo


def test_broken_models_do_not_take_the_good_one_down(mixed_repo: Path) -> None:
    proc, ready = start(mixed_repo)
    try:
        assert [m["name"] for m in ready["models"]] == ["tiny_onnx"]
        failed = {m["name"]: m["reason"] for m in ready["failed"]}
        assert sorted(failed) == ["7", "garbage", "unparsable"]
        assert "INVALID_PROTOBUF" in failed["garbage"] or "protobuf" in failed["garbage"].lower()
        assert "config.pbtxt" in failed["unparsable"]
        with TritonClient(ready["http"]) as client:
            assert client.model("tiny_onnx").name == "tiny_onnx"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_strict_fails_when_any_model_fails(mixed_repo: Path) -> None:
    done = subprocess.run(
        [*SERVE, str(mixed_repo), "--strict", *port_flags()],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    payload = json.loads(done.stdout)
    assert done.returncode == 1 and payload["ok"] is False and "tritonserver exited" in payload["error"]
