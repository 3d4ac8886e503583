"""Client errors that need no server: addresses, and a server that is down (nothing listening)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from modelship.cli.main import main
from modelship.contract.errors import ClientError
from modelship.serve.client import TritonClient, split_url
from modelship.serve.ports import free_port
from modelship.serve.served_runner import TritonRunner


@pytest.mark.parametrize(
    ("url", "protocol", "expected"),
    [
        ("http://h:1", None, ("http", "h:1")),
        ("grpc://h:2/", None, ("grpc", "h:2")),
        ("h:3", "grpc", ("grpc", "h:3")),
        (None, "grpc", ("grpc", "127.0.0.1:8001")),
        (None, None, ("http", "127.0.0.1:8000")),
    ],
)
def test_split_url(url: str | None, protocol: str | None, expected: tuple[str, str]) -> None:
    assert split_url(url, protocol) == expected


@pytest.mark.parametrize(("url", "protocol"), [("ftp://h:1", None), ("grpc://h:1", "http"), ("h:1", "udp")])
def test_bad_urls_are_refused(url: str, protocol: str | None) -> None:
    with pytest.raises(ClientError):
        split_url(url, protocol)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_server_down_is_one_clear_error(protocol: str) -> None:
    url = f"{protocol}://127.0.0.1:{free_port()}"
    with TritonClient(url, timeout_s=5) as client:
        assert not client.live()
        with pytest.raises(ClientError, match=f"cannot reach a Triton server at {url}") as err:
            client.model("anything")
    assert "modelship serve" in err.value.hint
    with pytest.raises(ClientError, match="cannot reach"):
        TritonRunner(url, "anything").run({"image": None})


def test_infer_command_reports_server_down_as_json(tmp_path) -> None:
    image = tmp_path / "x.png"
    image.write_bytes(b"not read: the server is down first")
    result = CliRunner().invoke(
        main, ["infer", str(image), "--model", "m", "--url", f"127.0.0.1:{free_port()}", "--json"]
    )
    assert result.exit_code == 1
    payload = json.loads(result.output)
    assert payload["ok"] is False and "cannot reach a Triton server" in payload["error"]
