"""A real Triton Inference Server (2.51, from the nvidia-pytriton wheel) on this machine, started and stopped cleanly.

The server runs on the backend directory of `serve.triton_install` (Python-based `onnxruntime` and `pytorch`
backends behind standard configs). This exercises the repository layout, the configs, Triton's HTTP/gRPC API and
its scheduler, not Triton's native C++ backends; production runs a stock `tritonserver` container on the same
repository (`production_command`). Everything said to a running server goes through `serve.client.TritonClient`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from modelship.contract.errors import ServeError
from modelship.contract.opsets import runtime_target
from modelship.serve.client import TritonClient
from modelship.serve.object_store import AWS_VARIABLES, S3Location, is_object_store
from modelship.serve.ports import check_ports, free_ports, is_loopback, listening
from modelship.serve.protocols import WireProtocol
from modelship.serve.restricted_api import API_KEY_HEADER, RESTRICTED_APIS, secret_headers, state_dir, write_secret
from modelship.serve.stubs import StubProcess, stub_processes
from modelship.serve.triton_install import TritonInstall, backend_directory, server_environment

EXIT_TIMEOUT_S = 5


def _die_with_parent() -> None:
    """In the child before exec: Linux delivers SIGTERM to the server if the process that started it dies, so a
    killed test run or CLI leaves no orphan server behind (PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def production_command(repo: Path | str, http_port: int = 8000, grpc_port: int = 8001, metrics_port: int = 8002) -> str:
    """The equivalent command on a GPU host with Docker and the stock Triton container (native backends); an s3://
    repository is read in place, with the AWS variables passed through."""
    ports = f"-p{http_port}:8000 -p{grpc_port}:8001 -p{metrics_port}:8002"
    if is_object_store(repo):
        passed = " ".join(f"-e {name}" for name in AWS_VARIABLES)
        return (
            f"docker run --rm --gpus=all {ports} {passed} {runtime_target().image} "
            f"tritonserver --model-repository={repo}"
        )
    return f"docker run --rm --gpus=all {ports} -v {Path(repo).resolve()}:/models {runtime_target().image} " + (
        "tritonserver --model-repository=/models"
    )


@dataclass
class TritonServer:
    """A local `tritonserver` process on free (or given) ports; a context manager.

    `start()` returns once `/v2/health/ready` answers 200 (every model loaded) and the metrics port accepts
    connections, or raises ServeError with the tail of the server log. `stop()` sends SIGTERM, waits
    `exit_timeout_s` + a margin, then kills.
    """

    repo: Path | str  # a folder, or an s3:// location (serve.object_store) that tritonserver reads itself
    host: str = "127.0.0.1"
    http_port: int | None = None
    grpc_port: int | None = None
    metrics_port: int | None = None
    explicit_models: list[str] | None = None  # None: load every model; a list: only these
    # Explicit model control (load/unload/reload over the repository API), with that API behind a per-server
    # secret header (API_KEY_HEADER, the value in `api_key_file`, 0600). False: Triton's mode "none", the
    # repository API closed entirely (every model loads at start).
    repository_api: bool = True
    expose_repository_api: bool = False  # allow the repository API on a non-loopback address
    api_key_file: Path | None = None
    strict: bool = False  # every model must load (else start fails); also makes /v2/health/ready strict
    log_file: Path | None = None
    verbose: bool = False
    startup_timeout_s: float = 180.0
    exit_timeout_s: int = EXIT_TIMEOUT_S
    extra_args: list[str] = field(default_factory=list)
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    startup_s: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if is_object_store(self.repo):
            self.repo = S3Location.parse(str(self.repo)).triton_url  # the endpoint goes into the path for Triton
        else:
            self.repo = Path(self.repo).resolve()
        self.log_file = Path(self.log_file) if self.log_file is not None else None
        self._requested_ports = (self.http_port, self.grpc_port, self.metrics_port)  # None: pick a free one
        self._secret: str | None = None
        self._shm_regions: set[str] = set()  # shared-memory regions of the stubs seen, removed at stop
        self._model_copies: set[Path] = set()  # tritonserver's temporary copies of object-storage models
        if self.explicit_models is not None and not self.repository_api:
            raise ServeError("loading chosen models needs the repository API (explicit model control)")
        if self.repository_api and not self.expose_repository_api and not is_loopback(self.host):
            raise ServeError(
                f"refusing to open Triton's repository API (model load/unload, which can run code) on {self.host}",
                hint="serve every model without --model (the API stays closed), bind 127.0.0.1, or pass "
                "--expose-repository-api to accept it behind the secret header",
            )

    @property
    def admin_headers(self) -> dict[str, str]:
        """The HTTP header that opens the restricted APIs (empty when the repository API is closed)."""
        return secret_headers(self._secret, WireProtocol.HTTP)

    @property
    def grpc_admin_headers(self) -> dict[str, str]:
        """The same over gRPC."""
        return secret_headers(self._secret, WireProtocol.GRPC)

    def client(self, protocol: WireProtocol = WireProtocol.HTTP) -> TritonClient:
        """A client of this server holding its secret (the repository API opens to it); close it after use."""
        url = self.grpc_url if WireProtocol(protocol) is WireProtocol.GRPC else self.http_url
        return TritonClient(url, api_key=self._secret, timeout_s=self.startup_timeout_s, concurrency=1)

    @property
    def _client_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host

    @property
    def http_url(self) -> str:
        return f"http://{self._client_host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"grpc://{self._client_host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self._client_host}:{self.metrics_port}/metrics"

    def command(self, backends: Path, install: TritonInstall) -> list[str]:
        cmd = [
            str(install.binary),
            f"--model-repository={self.repo}",
            f"--backend-directory={backends}",
            f"--http-address={self.host}",
            f"--http-port={self.http_port}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={self.host}",
            f"--metrics-port={self.metrics_port}",
            "--allow-gpu-metrics=false",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--strict-readiness={str(self.strict).lower()}",
            f"--exit-on-error={str(self.strict).lower()}",  # one broken model must not take the others down
        ]
        if self.repository_api:
            cmd.append("--model-control-mode=explicit")
            cmd.extend(f"--load-model={name}" for name in (self.explicit_models or ["*"]))
            restriction = f"{','.join(RESTRICTED_APIS)}:{API_KEY_HEADER}={self._secret}"
            cmd += [f"--http-restricted-api={restriction}", f"--grpc-restricted-protocol={restriction}"]
        if self.verbose:
            cmd.append("--log-verbose=1")
        return cmd + list(self.extra_args)

    def start(self) -> TritonServer:
        if self.process is not None:
            raise ServeError("this TritonServer is already running", hint="call stop() first")
        if isinstance(self.repo, Path) and not self.repo.is_dir():
            raise ServeError(f"{self.repo}: model repository does not exist", hint="run `modelship publish` first")
        install = TritonInstall.find()
        backends = backend_directory()
        self._check_models()
        if self.repository_api and self._secret is None:
            self.api_key_file = Path(self.api_key_file or state_dir() / f"triton-{os.getpid()}-{id(self):x}.key")
            self._secret = write_secret(self.api_key_file)
        attempts = 3 if None in self._requested_ports else 1  # a free port can be taken before Triton binds it
        for attempt in range(attempts):
            fresh = iter(free_ports(self.host, sum(port is None for port in self._requested_ports)))
            self.http_port, self.grpc_port, self.metrics_port = (
                next(fresh) if port is None else port for port in self._requested_ports
            )
            check_ports(self.host, {"http": self.http_port, "grpc": self.grpc_port, "metrics": self.metrics_port})
            try:
                self._launch(backends, install)
                return self
            except ServeError as exc:
                if attempt + 1 == attempts or "address already in use" not in str(exc.details.get("log", "")).lower():
                    raise
        return self

    def _check_models(self) -> None:
        """ServeError naming each model asked for that the repository does not hold (Triton checks object storage)."""
        if not isinstance(self.repo, Path):
            return
        missing = [m for m in self.explicit_models or [] if not (self.repo / m / "config.pbtxt").is_file()]
        if missing:
            held = sorted(p.name for p in self.repo.iterdir() if (p / "config.pbtxt").is_file())
            raise ServeError(
                f"{self.repo}: no model {', '.join(map(repr, missing))} in this repository",
                hint=f"models here: {', '.join(held) or 'none'} (publish it first with `modelship publish`)",
                details={"missing": missing, "models": held},
            )

    def _launch(self, backends: Path, install: TritonInstall) -> None:
        if self.log_file is None:
            self.log_file = Path(tempfile.mkstemp(prefix="tritonserver-", suffix=".log")[1])
        began = time.perf_counter()
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                self.command(backends, install),
                stdout=None if self.verbose else log,
                stderr=None if self.verbose else subprocess.STDOUT,
                env=server_environment(install, backends),
                start_new_session=True,  # Ctrl-C in a terminal reaches us, not the server; we stop it ourselves
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - began

    def _wait_ready(self) -> None:
        assert self.process is not None and self.metrics_port is not None  # _launch started it on start()'s ports
        deadline = time.monotonic() + self.startup_timeout_s
        with self.client() as client:
            while time.monotonic() < deadline:
                code = self.process.poll()
                if code is not None:
                    raise self._failure(f"tritonserver exited with code {code} while starting")
                # Triton opens its metrics endpoint after HTTP and gRPC: a scrape right after ready was refused
                if client.ready() and listening(self._client_host, self.metrics_port):
                    return
                time.sleep(0.1)
        raise self._failure(f"tritonserver not ready after {self.startup_timeout_s:.0f} s")

    def _failure(self, message: str) -> ServeError:
        tail = self.log_tail()
        reason = next((line for line in reversed(tail.splitlines()) if " E" in line[:2] or "error" in line.lower()), "")
        return ServeError(
            f"{message}: {reason.strip()[:300]}" if reason else message,
            hint=f"full server log: {self.log_file}",
            details={"log": tail, "log_file": str(self.log_file)},
        )

    def log_tail(self, lines: int = 40) -> str:
        if self.log_file is None or not self.log_file.exists():
            return ""
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def stubs(self) -> dict[int, StubProcess]:
        """The Python-backend stub processes of this server by pid (their shared-memory regions and, for object
        storage, the temporary model copies they load from are noted, to be removed at stop)."""
        if self.process is None:
            return {}
        stubs = stub_processes(self.process.pid)
        for stub in stubs.values():
            self._shm_regions.add(stub.shm_region)
            if not isinstance(self.repo, Path) and stub.model_file.parents[2] == Path(tempfile.gettempdir()):
                self._model_copies.add(stub.model_file.parents[1])
        return stubs

    def restart(self) -> None:
        """Stop the process if it still runs and start it again on the same ports and secret."""
        self._terminate()
        self._launch(backend_directory(), TritonInstall.find())

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after the exit timeout); returns its exit code. The secret
        file goes too."""
        code = self._terminate()
        if self._secret is not None and self.api_key_file is not None:
            self.api_key_file.unlink(missing_ok=True)
            self._secret = None
        return code

    def _terminate(self) -> int | None:
        """End the server, then any of its stubs still alive (a stub whose server died lingers for seconds), the
        shared-memory regions its stubs used (a killed stub leaves its region behind) and the temporary copies it
        made of object-storage models."""
        stubs = self.stubs()
        try:
            return self._end_process()
        finally:
            for pid in stubs:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            for region in self._shm_regions:
                Path("/dev/shm", region).unlink(missing_ok=True)
            self._shm_regions.clear()
            for folder in self._model_copies:
                shutil.rmtree(folder, ignore_errors=True)
            self._model_copies.clear()

    def _end_process(self) -> int | None:
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=self.exit_timeout_s + 10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
