"""Start and stop the FastAPI peer (`peer_server`) on loopback, and send it requests from the load generator."""

from __future__ import annotations

import http.client
import io
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np

from modelship.serve.server import free_port

Arrays = dict[str, np.ndarray]


def peer_unavailable() -> str | None:
    """Why the peer cannot run here (its packages missing), or None."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return f"FastAPI peer not installed ({exc.name}): pip install 'modelship[bench]'"
    return None


class PeerServer:
    """`peer_server` for `model` on a free loopback port: a context manager, ready when entered."""

    def __init__(self, model: Path, startup_timeout_s: float = 60.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "modelship.bench.peer_server", str(model), str(self.port)]
        self.log = Path(tempfile.mkstemp(prefix="modelship-peer-", suffix=".log")[1])
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + startup_timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("the FastAPI peer did not start") from None
                time.sleep(0.1)

    def last_error(self) -> str:
        """The last line of the peer's log (uvicorn prints a failed request's traceback there)."""
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1].strip()[:300] if lines else "no log"

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> PeerServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def peer_sender(port: int, inputs: Arrays) -> Callable[[], Callable[[], bytes]]:
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
