"""A real Triton Inference Server (2.51, from the nvidia-pytriton wheel) on this machine, started and stopped cleanly.

`nvidia-pytriton` ships the `tritonserver` binary, its libraries and the Python backend, but no native ONNX Runtime
or LibTorch backend. `backend_directory()` assembles one that serves standard repositories anyway: Triton maps
`platform: "onnxruntime_onnx"` to a backend named `onnxruntime` and `pytorch_libtorch` to `pytorch`, and a folder
`<backend-directory>/<name>/model.py` is a Python-based backend of that name. So the directory holds

    python/       libtriton_python.so, triton_python_backend_utils.py, triton_python_backend_stub  (real copies)
    onnxruntime/  model.py (+ modelship_backend.py)   runs model.onnx with onnxruntime
    pytorch/      model.py (+ modelship_backend.py)   runs model.pt with torch.jit.load
    stub-python/  bin/python3, pyvenv.cfg, a .pth   the stubs' interpreter: these packages, no bytecode written

This exercises the repository layout, the configs, Triton's HTTP/gRPC API and its scheduler, not Triton's native
C++ backends; production runs a stock `tritonserver` container on the same repository (`production_command`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import ipaddress
import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Collection
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from modelship.contract.errors import ServeError
from modelship.contract.opsets import runtime_target
from modelship.serve.object_store import AWS_VARIABLES, S3Location, is_object_store

BACKENDS_SOURCE = Path(__file__).parent / "backends"
PYTHON_BACKEND_NAMES = ("onnxruntime", "pytorch")
SHARED_BACKEND_FILES = ("modelship_backend.py",)
EXIT_TIMEOUT_S = 5
# The stubs' Python: an isolated interpreter (PYTHON* variables ignored) that finds its prefix through PATH. A
# virtual environment of its own in the backend directory, on this interpreter with this environment's packages,
# starts it with bytecode writing off, so the stubs import model.py from the repository (the publisher's) without
# writing __pycache__ into it.
STUB_ENV = "stub-python"
STUB_SITE = "import sys; sys.dont_write_bytecode = True\nimport site; site.addsitedir({site_packages!r})\n"
# Triton's API groups that change a running server, behind the per-server secret; inference, health, metadata,
# statistics and the model config stay open.
RESTRICTED_APIS = ("model-repository", "logging", "trace", "shared-memory")
API_KEY_HEADER = "modelship-api-key"  # the header Triton checks before any restricted-API request
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"  # how a gRPC request carries that header


@dataclass(frozen=True)
class TritonInstall:
    """Where nvidia-pytriton put the server binary, its shared libraries and the Python backend."""

    binary: Path
    libs: Path
    python_backend: Path
    stub: Path
    version: str

    @classmethod
    def find(cls) -> TritonInstall:
        try:
            import pytriton
        except ImportError:
            raise ServeError(
                "nvidia-pytriton is not installed: no tritonserver binary",
                hint="pip install nvidia-pytriton==0.7.0, or run a stock tritonserver container",
            ) from None
        root = Path(pytriton.__file__).parent / "tritonserver"
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        install = cls(
            binary=root / "bin" / "tritonserver",
            libs=Path(pytriton.__file__).parent.parent / "nvidia_pytriton.libs",
            python_backend=root / "backends" / "python",
            stub=root / "python_backend_stubs" / py / "triton_python_backend_stub",
            version=metadata.version("nvidia-pytriton"),
        )
        missing = [p for p in (install.binary, install.python_backend, install.stub) if not p.exists()]
        if missing:
            raise ServeError(f"nvidia-pytriton install is incomplete, missing {missing[0]}", hint=f"Python {py}?")
        return install


def backend_directory(cache: Path | None = None) -> Path:
    """The assembled backend directory, built once per (pytriton, Python, backend sources) and reused.

    Built in a temporary folder and renamed into place, so concurrent servers never see a half-built one.
    """
    install = TritonInstall.find()
    sources = sorted(p for p in BACKENDS_SOURCE.rglob("*.py") if "__pycache__" not in p.parts)
    key = hashlib.sha256(f"{install.version}|{sys.version}|{sys.executable}|{STUB_SITE}".encode())
    for path in sources:
        key.update(path.read_bytes())
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "modelship" / "backends"
    target = cache / key.hexdigest()[:16]
    if target.is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
    python_dir = staging / "python"
    python_dir.mkdir()
    shutil.copy2(install.python_backend / "libtriton_python.so", python_dir)  # a copy: symlinks "escape" the dir
    shutil.copy2(install.python_backend / "triton_python_backend_utils.py", python_dir)
    shutil.copy2(install.stub, python_dir / "triton_python_backend_stub")
    _stub_interpreter(staging / STUB_ENV)
    for backend in PYTHON_BACKEND_NAMES:
        (staging / backend).mkdir()
        for name in ("model.py", *SHARED_BACKEND_FILES):
            source = BACKENDS_SOURCE / backend / name if name == "model.py" else BACKENDS_SOURCE / name
            shutil.copy2(source, staging / backend / name)
    try:
        staging.rename(target)
    except OSError:  # another process won the race; its copy is identical
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _stub_interpreter(folder: Path) -> None:
    """A virtual environment for the stubs (STUB_ENV): bin/python3 is this interpreter, and a .pth file turns
    bytecode writing off and adds this environment's site-packages (with their own .pth files)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    base = Path(getattr(sys, "_base_executable", sys.executable))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in ("python", "python3", version):
        (bin_dir / name).symlink_to(base)
    (folder / "pyvenv.cfg").write_text(
        f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {platform.python_version()}\n"
    )
    site_dir = folder / "lib" / version / "site-packages"
    site_dir.mkdir(parents=True)
    (site_dir / "modelship_stub.pth").write_text(STUB_SITE.format(site_packages=sysconfig.get_paths()["purelib"]))


def interpreter_library_path(*extra: str) -> str:
    """LD_LIBRARY_PATH with this interpreter's libpython folder first, then `extra` and the inherited value: a
    Python-backend stub links libpython3.X and must load this interpreter's, not the system's (another patch
    release under this interpreter's standard library)."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    return os.pathsep.join(p for p in (libdir, *extra, os.environ.get("LD_LIBRARY_PATH")) if p)


def server_environment(install: TritonInstall, backends: Path) -> dict[str, str]:
    """PATH and LD_LIBRARY_PATH so the Python stub runs this interpreter and its packages, through the backend
    directory's stub environment (see the module doc)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(backends / STUB_ENV / "bin"), env.get("PATH", "")])
    env["LD_LIBRARY_PATH"] = interpreter_library_path(str(install.libs))
    return env


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(host, 1)[0]


def free_ports(host: str = "127.0.0.1", count: int = 1) -> list[int]:
    """`count` distinct ports free on `host` now (bound together, so the system cannot hand out one twice)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def bind_problem(host: str, port: int) -> int | None:
    """None if (host, port) can be bound now, else the errno why (EADDRINUSE: something listens there;
    EADDRNOTAVAIL: not an address of this machine). A port merely in TIME_WAIT counts as free, as it does for
    Triton."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        return errno.EADDRNOTAVAIL
    with contextlib.closing(socket.socket(family, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno or errno.EADDRINUSE
    return None


def _die_with_parent() -> None:
    """In the child before exec: Linux delivers SIGTERM to the server if the process that started it dies, so a
    killed test run or CLI leaves no orphan server behind (PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def write_secret(path: Path) -> str:
    """A new random secret in `path`, created 0600 (owner only) in a 0700 folder; returns it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret = secrets.token_urlsafe(32)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    return secret


def state_dir() -> Path:
    """Where per-server secrets live: $XDG_RUNTIME_DIR/modelship, else ~/.cache/modelship/servers."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "modelship" if runtime else Path.home() / ".cache" / "modelship" / "servers"


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (from /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(child) for child in task.read_text().split()]
    return found


@dataclass(frozen=True)
class Stub:
    """A Python-backend stub process as Triton started it (its command line): the model instance it runs (Triton's
    instance name, MODEL_GROUP_INDEX, or the bare model name for a model-level stub that a load starts and ends)
    and the version folder it loaded, in the repository or in the copy Triton made of an object-storage one."""

    pid: int
    instance: str
    version: str

    def model(self, names: Collection[str]) -> str | None:
        """The model this stub runs an instance of, among Triton's model `names`; None for a model-level stub."""
        match = re.fullmatch(r"(.+)_\d+_\d+", self.instance)
        return match.group(1) if match and match.group(1) in names else None


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

    `start()` returns once `/v2/health/ready` answers 200 (every model loaded) or raises ServeError with the tail
    of the server log. `stop()` sends SIGTERM, waits `exit_timeout_s` + a margin, then kills.
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
        return {API_KEY_HEADER: self._secret} if self._secret else {}

    @property
    def grpc_admin_headers(self) -> dict[str, str]:
        """The same over gRPC: Triton expects the header name behind `triton-grpc-protocol-`."""
        return {GRPC_HEADER_PREFIX + name: value for name, value in self.admin_headers.items()}

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
            self._check_ports()
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

    def _check_ports(self) -> None:
        """Refuse ports something already listens on (readiness probes would otherwise reach the other server),
        out of range, or on an address that is not this machine's."""
        ports = {"http": self.http_port, "grpc": self.grpc_port, "metrics": self.metrics_port}
        if len(set(ports.values())) < len(ports):
            raise ServeError(f"HTTP, gRPC and metrics ports must differ, got {ports}")
        for kind, port in ports.items():
            if not 0 < port < 65536:
                raise ServeError(f"--{kind}-port {port} is not a port number", hint="use 1-65535")
            problem = bind_problem(self.host, port)
            if problem == errno.EADDRINUSE:
                raise ServeError(
                    f"{kind} port {port} on {self.host} is already in use",
                    hint=f"stop the other server or pick another port (--{kind}-port)",
                    details={"port": port},
                )
            if problem is not None:
                raise ServeError(
                    f"cannot listen on {self.host}:{port} ({os.strerror(problem)})",
                    hint="--host must be an address of this machine (127.0.0.1, 0.0.0.0 or one of its interfaces); "
                    "ports below 1024 need root",
                    details={"host": self.host, "port": port, "errno": problem},
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
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise self._failure(f"tritonserver exited with code {code} while starting")
            if self.ready():
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

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.http_url}/v2/health/ready", timeout=1) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def _post(self, path: str, timeout_s: float = 30.0, body: dict[str, Any] | None = None) -> Any:
        """POST `body` to the HTTP endpoint with the restricted-API header; the JSON answer, or ServeError."""
        return self._request(path, timeout_s, json.dumps(body or {}).encode())

    def _request(self, path: str, timeout_s: float = 30.0, data: bytes | None = None) -> Any:
        """GET (or POST `data`) with the restricted-API header; the JSON answer, or ServeError."""
        request = urllib.request.Request(
            f"{self.http_url}{path}", data=data, method="GET" if data is None else "POST", headers=self.admin_headers
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            with contextlib.suppress(ValueError, AttributeError):
                detail = json.loads(detail).get("error", detail)
            raise ServeError(f"tritonserver refused {path}: {detail}", details={"status": exc.code}) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            raise ServeError(f"tritonserver at {self.http_url} did not answer {path} ({exc})") from None
        return json.loads(body) if body else None

    def model_index(self) -> list[dict[str, Any]]:
        """Every model of the repository with its state (READY, UNAVAILABLE, ...) and the reason it failed."""
        return list(self._post("/v2/repository/index") or [])

    def reload(self, model: str, config: dict[str, Any] | None = None) -> None:
        """Unload then load `model` (its /ready answers false in between), with `config` (the config it was
        loaded with, e.g. a rollout's version policy) when given, else the repository's; needs the repository
        API."""
        body = {"parameters": {"config": json.dumps(config)}} if config is not None else {}
        self._post(f"/v2/repository/models/{model}/unload")
        self._post(f"/v2/repository/models/{model}/load", timeout_s=self.startup_timeout_s, body=body)

    def model_config(self, model: str) -> dict[str, Any]:
        """The config `model` is served with (GET /v2/models/NAME/config)."""
        return self._request(f"/v2/models/{model}/config")

    def stubs(self) -> dict[int, Stub]:
        """The Python-backend stub processes of this server by pid (their shared-memory regions and, for object
        storage, the temporary model copies they load from are noted, to be removed at stop)."""
        if self.process is None:
            return {}
        stubs = {}
        for pid in _children(self.process.pid):
            try:
                argv = [os.fsdecode(a) for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
            except OSError:
                continue
            if argv and argv[0].endswith("triton_python_backend_stub") and len(argv) > 8:
                model_file = Path(argv[1])
                stubs[pid] = Stub(pid, instance=argv[8], version=model_file.parent.name)
                self._shm_regions.add(argv[2])
                if not isinstance(self.repo, Path) and model_file.parent.parent.parent == Path(tempfile.gettempdir()):
                    self._model_copies.add(model_file.parent.parent)
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
