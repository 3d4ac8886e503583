"""Bad input to `serve` and `infer`: the same contract as tests/test_bad_input.py, with a real Triton server where
the cause is only visible to one (an unknown model, an image that does not decode)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from serve_exports import write_export

from modelship.serve.ports import free_port
from modelship.serve.publish import publish_export
from modelship.serve.server import TritonServer
from tests.cli_contract import expect_failure, port_flags

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bad_serving")
    publish_export(write_export(root / "tiny"), root / "repo", artifacts=["onnx"])
    return root / "repo"


@pytest.fixture(scope="module")
def server(repo: Path):
    with TritonServer(repo) as triton:
        yield triton


def serve(repo: Path, *args: object) -> list[object]:
    return ["serve", "--repo", repo, *port_flags(), *args]


@pytest.fixture
def listening():
    """A port something listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_serve_on_an_address_of_another_machine(repo: Path) -> None:
    expect_failure(serve(repo, "--host", "192.0.2.1"), names=["192.0.2.1", "address of this machine"], untouched=[repo])


def test_serve_on_an_unknown_host(repo: Path) -> None:
    expect_failure(serve(repo, "--host", "no.such.host.invalid"), names=["no.such.host.invalid"], untouched=[repo])


def test_serve_on_a_taken_port(repo: Path, listening: int) -> None:
    args = ["serve", "--repo", repo, *port_flags(http=listening)]
    expect_failure(args, names=[f"http port {listening}", "already in use", "--http-port"], untouched=[repo])


def test_serve_with_one_port_twice(repo: Path) -> None:
    port = free_port()
    args = ["serve", "--repo", repo, *port_flags(http=port, grpc=port)]
    expect_failure(args, names=["must differ"], untouched=[repo])


def test_serve_on_an_impossible_port(repo: Path) -> None:
    args = ["serve", "--repo", repo, *port_flags(http=70000)]
    expect_failure(args, names=["--http-port", "'70000' is not a finite integer from 1 to 65,535"], untouched=[repo])


def test_serve_an_unknown_model(repo: Path) -> None:
    expect_failure(serve(repo, "--model", "nosuch"), names=["nosuch", "tiny_onnx"], untouched=[repo])


def test_serve_an_unsafe_model_name(repo: Path) -> None:
    expect_failure(serve(repo, "--model", "../x"), names=["../x", "not a safe folder name"], untouched=[repo])


def test_serve_refuses_the_repository_api_on_the_network(repo: Path) -> None:
    args = serve(repo, "--host", "0.0.0.0", "--model", "tiny_onnx")
    expect_failure(args, names=["repository API", "0.0.0.0", "--expose-repository-api"], untouched=[repo])


def test_serve_a_missing_repository(tmp_path: Path) -> None:
    expect_failure(serve(tmp_path / "nope"), names=["nope"], untouched=[tmp_path])


def test_serve_a_repository_of_broken_models(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "garbage" / "1").mkdir(parents=True)
    (repo / "garbage" / "1" / "model.onnx").write_bytes(b"not onnx")
    (repo / "garbage" / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\nmax_batch_size: 0\n')
    (repo / "unparsable").mkdir()
    (repo / "unparsable" / "config.pbtxt").write_text("this is { not a config")
    expect_failure(serve(repo), names=["no model loaded", "garbage", "unparsable"], untouched=[repo])


def infer(image: Path, *args: object) -> list[object]:
    return ["infer", image, "--model", "tiny_onnx", *args]


@pytest.fixture
def image(tmp_path: Path) -> Path:
    from PIL import Image

    path = tmp_path / "img.png"
    Image.new("RGB", (20, 20), (10, 200, 30)).save(path)
    return path


@pytest.mark.parametrize(
    ("url", "names"),
    [
        ("127.0.0.1:notaport", ["127.0.0.1:notaport", "not a server address"]),
        ("http://", ["'http://'", "not a server address"]),
        ("ftp://h:1", ["ftp"]),
        ("http://127.0.0.1:0", ["not a server address"]),
    ],
)
def test_infer_bad_urls(image: Path, url: str, names: list[str]) -> None:
    expect_failure(infer(image, "--url", url), names=names, untouched=[image.parent])


def test_infer_server_down(image: Path) -> None:
    expect_failure(infer(image, "--url", f"127.0.0.1:{free_port()}"), names=["cannot reach"], untouched=[image.parent])


def test_infer_protocol_disagrees_with_url(image: Path) -> None:
    expect_failure(infer(image, "--url", "http://h:1", "--protocol", "grpc"), names=["says http"])


@pytest.mark.parametrize("flag", ["--top-k", "--batch"])
def test_infer_zero_counts(image: Path, flag: str) -> None:
    expect_failure(infer(image, flag, "0"), names=[flag, "'0' is not a finite integer from 1"])


def test_infer_missing_image(tmp_path: Path) -> None:
    expect_failure(infer(tmp_path / "nope.png"), names=["nope.png"])


def test_infer_unknown_model(server: TritonServer, image: Path) -> None:
    args = ["infer", image, "--model", "nosuch", "--url", server.http_url]
    expect_failure(args, names=["'nosuch'", "not served"], untouched=[image.parent])


@pytest.mark.parametrize(
    ("content", "names"),
    [(b"plain text, not pixels", ["not an image"]), (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ["cannot decode"])],
    ids=["text", "truncated-png"],
)
def test_infer_files_that_are_not_images(server: TritonServer, tmp_path: Path, content: bytes, names) -> None:
    bad = tmp_path / "bad.png"
    bad.write_bytes(content)
    expect_failure(infer(bad, "--url", server.grpc_url), names=["bad.png", *names], untouched=[tmp_path])
