"""Client errors that need no server: addresses, and a server that is down (nothing listening)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
from click.testing import CliRunner

from modelship.cli.main import main
from modelship.contract.errors import ClientError
from modelship.serve.client import TritonClient, split_url
from modelship.serve.ports import free_port
from modelship.serve.protocols import WireProtocol
from modelship.serve.served_runner import TritonRunner


@pytest.mark.parametrize(
    ("url", "protocol", "expected"),
    [
        ("http://h:1", None, (WireProtocol.HTTP, "h:1")),
        ("grpc://h:2/", None, (WireProtocol.GRPC, "h:2")),
        ("h:3", WireProtocol.GRPC, (WireProtocol.GRPC, "h:3")),
        (None, WireProtocol.GRPC, (WireProtocol.GRPC, "127.0.0.1:8001")),
        (None, None, (WireProtocol.HTTP, "127.0.0.1:8000")),
    ],
)
def test_split_url(url: str | None, protocol: WireProtocol | None, expected: tuple[WireProtocol, str]) -> None:
    assert split_url(url, protocol) == expected


@pytest.mark.parametrize(
    ("url", "protocol"), [("ftp://h:1", None), ("grpc://h:1", WireProtocol.HTTP), ("h:1/x", None), ("h:99999", None)]
)
def test_bad_urls_are_refused(url: str, protocol: WireProtocol | None) -> None:
    with pytest.raises(ClientError):
        split_url(url, protocol)


@pytest.mark.parametrize("protocol", list(WireProtocol))
def test_server_down_is_one_clear_error(protocol: WireProtocol) -> None:
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


@contextlib.contextmanager
def never_answering(protocol: WireProtocol) -> Iterator[str]:
    """The URL of a server that takes every request and never answers: for HTTP a TCP listener, for gRPC a real
    gRPC server whose every method waits (a gRPC client first needs the HTTP/2 handshake a listener never gives)."""
    if protocol is WireProtocol.HTTP:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        return
    released = threading.Event()

    class Never(grpc.GenericRpcHandler):
        def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(lambda request, context: released.wait() and b"")

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers((Never(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"grpc://127.0.0.1:{port}"
    finally:
        released.set()
        server.stop(None)


@pytest.mark.parametrize("protocol", list(WireProtocol))
def test_a_server_that_takes_the_request_but_never_answers_is_a_timeout(
    protocol: WireProtocol, capfd: pytest.CaptureFixture[str]
) -> None:
    """A server busy past the client's timeout: a timeout, said as one, not "cannot reach", and no traceback on
    stderr."""
    with (
        never_answering(protocol) as url,
        TritonClient(url, timeout_s=0.5) as client,
        pytest.raises(ClientError, match=r"timed out after 0\.5 s") as err,
    ):
        client.infer_many("m", [{"x": np.zeros(1)}])
    assert "cannot reach" not in str(err.value) and err.value.details["timed_out"] is True
    assert "Traceback" not in capfd.readouterr().err
