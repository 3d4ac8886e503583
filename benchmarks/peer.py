"""Start and stop the peers on loopback (the FastAPI `peer_server`, the PyTriton `pytriton_peer`), and send the
FastAPI peer requests from the load generator (PyTriton speaks Triton's protocols: `requests.sender`)."""

from __future__ import annotations

import http.client
import io
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modelship.contract.tensors import Tensors
from modelship.serve.ports import free_port, free_ports
from modelship.serve.protocols import WireProtocol
from modelship.serve.triton_install import interpreter_library_path

PYTRITON_MODEL = "peer"


def peer_unavailable() -> str | None:
    """Why the FastAPI peer cannot run here (its packages missing), or None."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return f"FastAPI peer not installed ({exc.name}): pip install 'modelship[bench]'"
    return None


def pytriton_unavailable() -> str | None:
    """Why the PyTriton peer cannot run here, or None."""
    try:
        import pytriton  # noqa: F401
    except ImportError:
        return "PyTriton not installed (nvidia-pytriton supports Linux with glibc 2.35+ and Python 3.8-3.12)"
    return None


class PeerProcess:
    """A peer server process on loopback, started by `command`, ready once `ready_url` answers 200; a context
    manager, ready when entered. The process's output goes to a log (`last_error`); `env`: its environment."""

    def __init__(
        self,
        command: list[str],
        ready_url: str,
        what: str,
        env: dict[str, str] | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.log = Path(tempfile.mkstemp(prefix="modelship-peer-", suffix=".log")[1])
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + startup_timeout_s
        while True:
            try:
                with urllib.request.urlopen(ready_url, timeout=1):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"the {what} did not start") from None
                time.sleep(0.1)

    def last_error(self) -> str:
        """The last line of the peer's log (uvicorn prints a failed request's traceback there)."""
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1].strip()[:300] if lines else "no log"

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PeerServer(PeerProcess):
    """`peer_server` (FastAPI) for `model` on a free loopback port, its session with `threads` intra-op threads
    (default the cores, as the in-process baseline)."""

    def __init__(self, model: Path, threads: int | None = None) -> None:
        from modelship.bench.measure import cpu_threads

        self.port = free_port()
        url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "modelship.bench.peer_server", str(model), str(self.port)]
        super().__init__([*command, str(threads or cpu_threads())], f"{url}/health", "FastAPI peer")


class PyTritonPeer(PeerProcess):
    """`pytriton_peer` for `model` on free loopback ports (HTTP, gRPC, metrics), serving it as `PYTRITON_MODEL`
    over tritonclient's protocols; `threads` as for PeerServer. PyTriton's Python stub links the system's
    libpython3.X; `interpreter_library_path` puts this interpreter's first (as for modelship's own stubs), else
    the stub pairs another patch release's libpython with this one's standard library and PyTriton's proxy model
    fails to load (`'_thread.RLock' object has no attribute '_recursion_count'`)."""

    def __init__(self, model: Path, threads: int | None = None) -> None:
        from modelship.bench.measure import cpu_threads

        http, grpc, metrics = free_ports(count=3)
        self.model = PYTRITON_MODEL
        self.grpc_url = f"127.0.0.1:{grpc}"
        script = [sys.executable, "-m", "modelship.bench.pytriton_peer", str(model), self.model]
        command = [*script, str(http), str(grpc)]
        ready = f"http://127.0.0.1:{http}/v2/models/{self.model}/ready"
        env = {**os.environ, "LD_LIBRARY_PATH": interpreter_library_path()}
        super().__init__([*command, str(metrics), str(threads or cpu_threads())], ready, "PyTriton peer", env)


def peer_sender(port: int, inputs: Tensors) -> Callable[[], Callable[[], bytes]]:
    """A factory of request functions for the load generator: each has its own keep-alive connection and sends
    the same inputs (as .npz) on every call."""
    buffer = io.BytesIO()
    np.savez(buffer, **inputs)
    body = buffer.getvalue()

    def make() -> Callable[[], bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

        def send() -> bytes:
            connection.request("POST", "/infer", body, {"Content-Type": "application/octet-stream"})
            response = connection.getresponse()
            payload = response.read()
            if response.status != 200:
                raise RuntimeError(f"peer answered {response.status}: {payload[:200]!r}")
            return payload

        send.close = connection.close  # type: ignore[attr-defined]
        return send

    return make


@dataclass(frozen=True)
class Peer:
    """A server the bench compares modelship with, measured at the same points: its row label, the protocol it
    speaks, why it cannot run here (None if it can), how to start it for a model (`threads` as the baseline's) and
    the load generator's request factory for one input set."""

    label: str
    protocol: str
    unavailable: Callable[[], str | None]
    start: Callable[[Path, int | None], PeerProcess]
    requests: Callable[[PeerProcess, Tensors, Tensors], Callable[[], Callable[[], object]]]


def _fastapi_requests(peer: PeerProcess, inputs: Tensors, outputs: Tensors) -> Callable[[], Callable[[], bytes]]:
    assert isinstance(peer, PeerServer)
    return peer_sender(peer.port, inputs)


def _pytriton_requests(peer: PeerProcess, inputs: Tensors, outputs: Tensors) -> Callable[[], Callable[[], object]]:
    from modelship.serve.load.requests import sender

    assert isinstance(peer, PyTritonPeer)
    return sender(peer.grpc_url, WireProtocol.GRPC, peer.model, inputs, outputs)


PEERS = (
    Peer("fastapi peer", "http", peer_unavailable, PeerServer, _fastapi_requests),
    Peer("pytriton peer", "grpc", pytriton_unavailable, PyTritonPeer, _pytriton_requests),
)
