"""`modelship serve`: run a local Triton server on a model repository, supervised, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

import click

from modelship.cli.flags import flag_group
from modelship.cli.main import GuardedCommand, emit_json, json_option
from modelship.cli.numbers import PORT
from modelship.cli.server_flags import repo_option
from modelship.contract.cpu_kinds import PARAM_INT8_CPU, CpuKind, held_only_on_vnni, this_cpu
from modelship.contract.errors import ServeError, UsageError
from modelship.contract.json_object import JsonObject
from modelship.serve import repository
from modelship.serve.client import TritonClient
from modelship.serve.object_store import is_object_store
from modelship.serve.ports import is_loopback
from modelship.serve.restricted_api import API_KEY_HEADER
from modelship.serve.server import TritonServer, production_command
from modelship.serve.stock_image import missing_packages, stock_dockerfile
from modelship.serve.supervisor import Supervisor


@dataclass(frozen=True)
class ServeFlags:
    """Where and how `modelship serve` runs the server; checked before anything starts."""

    repo: str
    http_port: int
    grpc_port: int
    metrics_port: int
    host: str
    models: tuple[str, ...]
    strict: bool
    expose_repository_api: bool
    api_key_file: Path | None
    log_file: Path | None
    verbose: bool

    def __post_init__(self) -> None:
        for name in self.models:
            repository.check_model_name(name)
        if not is_object_store(self.repo) and not Path(self.repo).is_dir():
            raise UsageError(
                f"{self.repo}: no model repository here", hint="publish into it first with `modelship publish`"
            )

    def server(self) -> TritonServer:
        return TritonServer(
            self.repo,
            host=self.host,
            http_port=self.http_port,
            grpc_port=self.grpc_port,
            metrics_port=self.metrics_port,
            explicit_models=list(self.models) or None,
            repository_api=is_loopback(self.host) or bool(self.models),
            expose_repository_api=self.expose_repository_api,
            api_key_file=self.api_key_file,
            strict=self.strict,
            log_file=self.log_file,
            verbose=self.verbose,
        )


@dataclass(frozen=True)
class ServedModel:
    """A model the server loaded: its name, version and state as the repository index says."""

    name: str
    version: str
    state: str


@dataclass(frozen=True)
class FailedModel:
    """A model that did not load, and why (Triton's reason, else its log line)."""

    name: str
    reason: str


@dataclass(frozen=True)
class RepositoryApi:
    """How to open the server's repository API: the header to send and the file holding its secret."""

    header: str
    key_file: str


@dataclass(frozen=True)
class ServeSummary:
    """What `modelship serve` started: where it answers, what is served, what failed and why (its --json)."""

    repo: str
    http: str
    grpc: str
    metrics: str
    models: list[ServedModel]
    failed: list[FailedModel]
    restored: list[str]
    startup_s: float
    repository_api: RepositoryApi | None
    log_file: str | None
    production_command: str
    stock_dockerfile: str | None
    cpu_warnings: list[str]  # INT8 models whose verdict holds on VNNI CPUs only, served on one without

    def to_dict(self) -> JsonObject:
        return {"ok": True, **asdict(self)}


serve_flags = flag_group(
    "flags",
    [
        repo_option("to serve (tritonserver reads object storage itself)"),
        click.option("--http-port", type=PORT, default=8000, show_default=True, help="HTTP/REST port."),
        click.option("--grpc-port", type=PORT, default=8001, show_default=True, help="gRPC port."),
        click.option("--metrics-port", type=PORT, default=8002, show_default=True, help="Prometheus metrics port."),
        click.option(
            "--host",
            default="127.0.0.1",
            show_default=True,
            help="Address to bind. 0.0.0.0 exposes the server to the network (then the repository API stays closed).",
        ),
        click.option(
            "--model",
            "models",
            multiple=True,
            metavar="NAME",
            help="Load only this model (explicit model control; repeat). Default: every model in the repository.",
        ),
        click.option(
            "--strict",
            is_flag=True,
            help="Fail unless every model loads (default: serve the models that load and name the ones that failed).",
        ),
        click.option(
            "--expose-repository-api",
            is_flag=True,
            help="Allow Triton's repository API (model load/unload, which can run code) on a non-loopback --host. It "
            "is always behind a secret header whose value is in --api-key-file.",
        ),
        click.option(
            "--api-key-file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help=f"Where to write the secret that opens the repository, logging, trace and shared-memory APIs (mode "
            f"0600; sent as header {API_KEY_HEADER}). Default: a new "
            "file under $XDG_RUNTIME_DIR/modelship or ~/.cache/modelship/servers, removed at exit.",
        ),
        click.option(
            "--log-file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Where Triton's own log goes (default: a new file under the temp folder; its path is printed).",
        ),
        click.option("--verbose", is_flag=True, help="Triton's verbose log on this terminal instead of a log file."),
    ],
    ServeFlags,
)


@click.command("serve", cls=GuardedCommand)
@serve_flags
@json_option
def serve_command(flags: ServeFlags, as_json: bool) -> None:
    """Serve a model repository with a local Triton Inference Server (2.51, from nvidia-pytriton) until Ctrl-C.

    ONNX and TorchScript models run through modelship's Python-based `onnxruntime` and `pytorch` backends (the
    stock container uses Triton's native ones on the same repository; the equivalent command is printed).

    \b
    Supervised: if tritonserver dies (a request can abort it) it is restarted on the same ports with back-off;
    if a model's backend stub dies, that model is reloaded. Models that fail to load are named and skipped;
    the command fails only when none loads (or any, with --strict). On loopback the repository API is open
    behind a secret header (needed for --model and for reloads); on other addresses it stays closed unless
    --expose-repository-api.
    """
    server = flags.server()
    restored = _recover_interrupted_publish(flags.repo)
    stop = threading.Event()

    def request_stop(_signum: int, _frame: FrameType | None) -> None:
        # not stop.set() here: the handler runs in the main thread, which may be inside stop.wait() holding the
        # event's lock, and set() would wait for that lock forever (serve then ignored the signal, seen in CI once)
        threading.Thread(target=stop.set, name="modelship-stop", daemon=True).start()

    previous = signal.signal(signal.SIGTERM, request_stop)
    previous_int = signal.getsignal(signal.SIGINT)
    click.echo(f"starting tritonserver on {flags.repo} ...", err=True)
    try:
        server.start()  # Ctrl-C here interrupts the start (KeyboardInterrupt)
        signal.signal(signal.SIGINT, request_stop)  # from now on Ctrl-C asks the supervisor to stop
        summary = _summary(server, flags, restored)
        if as_json:
            emit_json(summary.to_dict())
        else:
            _print_summary(summary)
        Supervisor(server, log=lambda line: click.echo(f"supervisor: {line}", err=True)).run(stop)
    except KeyboardInterrupt:
        pass
    finally:
        if server.process is not None:
            click.echo("stopping tritonserver ...", err=True)
        server.stop()
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _recover_interrupted_publish(repo: str) -> list[str]:
    """Roll back a publish whose publisher was killed part-way (serve.repository), before Triton reads the repo
    (object storage needs none: its publisher never makes a partial version visible)."""
    if is_object_store(repo) or not repository.staging_root(Path(repo)).exists():
        return []
    with repository.locked(Path(repo)):
        return repository.recover(Path(repo))


def _summary(server: TritonServer, flags: ServeFlags, restored: list[str]) -> ServeSummary:
    """What is served, what failed and why; ServeError when nothing loaded."""
    wanted = server.explicit_models
    with server.client() as client:
        index = [m for m in client.repository_index() if wanted is None or m.name in wanted]
        warnings = _cpu_warnings(client, [m.name for m in index if m.ready])
    loaded = [ServedModel(m.name, m.version, m.state) for m in index if m.ready]
    failed = [FailedModel(m.name, m.reason or _log_reason(server, m.name)) for m in index if not m.ready]
    if failed and not loaded:
        raise ServeError(
            f"no model loaded from {server.repo}: " + "; ".join(f"{f.name}: {f.reason[:160]}" for f in failed),
            hint=f"fix or remove the broken model folders (server log: {server.log_file})",
            details={"failed": [asdict(f) for f in failed]},
        )
    return ServeSummary(
        repo=str(server.repo),
        http=server.http_url,
        grpc=server.grpc_url,
        metrics=server.metrics_url,
        models=loaded,
        failed=failed,
        restored=restored,
        startup_s=round(server.startup_s or 0.0, 2),
        repository_api=RepositoryApi(API_KEY_HEADER, str(server.api_key_file)) if server.repository_api else None,
        log_file=None if server.verbose else str(server.log_file),
        production_command=production_command(server.repo, flags.http_port, flags.grpc_port, flags.metrics_port),
        stock_dockerfile=stock_dockerfile(m.name for m in loaded),
        cpu_warnings=warnings,
    )


def _cpu_warnings(client: TritonClient, names: list[str]) -> list[str]:
    """One line per INT8 model made for VNNI CPUs (its published config says so) when this CPU has no VNNI."""
    if this_cpu() is CpuKind.VNNI:
        return []
    notes = {name: client.model_config(name).get("parameters", {}).get(PARAM_INT8_CPU, {}) for name in names}
    return [
        f"{name}: made for VNNI CPUs and this one has none: its answers may miss its verdict here (re-export with "
        "--int8-cpu avx2 for a variant that holds on any x86-64 CPU)"
        for name, note in notes.items()
        if held_only_on_vnni(str(note.get("string_value", "")))
    ]


def _log_reason(server: TritonServer, name: str) -> str:
    """Why Triton could not even poll a model folder (the index has no reason for those): its log line."""
    lines = [line for line in server.log_tail(400).splitlines() if f"'{name}'" in line]
    return lines[-1].split("] ", 1)[-1].strip().strip('"') if lines else "not loadable (see the server log)"


def _print_summary(summary: ServeSummary) -> None:
    click.echo(f"Triton ready in {summary.startup_s} s")
    click.echo(f"  HTTP     {summary.http}")
    click.echo(f"  gRPC     {summary.grpc}")
    click.echo(f"  metrics  {summary.metrics}")
    click.echo(f"  models   ({len(summary.models)})")
    for model in summary.models:
        click.echo(f"    {model.name:<40} v{model.version:<4} {model.state}")
    for failure in summary.failed:
        click.secho(f"    {failure.name:<40} FAILED: {failure.reason[:200]}", fg="red")
    for target in summary.restored:
        click.echo(f"  restored {target} (a publish was interrupted)")
    for warning in summary.cpu_warnings:
        click.secho(f"  warning: {warning}", fg="yellow")
    if summary.repository_api:
        api = summary.repository_api
        click.echo(f"  repository API: header {api.header} with the secret in {api.key_file}")
    else:
        click.echo("  repository API: closed")
    if summary.log_file:
        click.echo(f"  log      {summary.log_file}")
    click.echo("Production equivalent (GPU host, stock container with native backends):")
    click.echo(f"  {summary.production_command}")
    if summary.stock_dockerfile:
        needs = " and ".join(missing_packages(m.name for m in summary.models))
        click.echo(f"  the Python-backend models need {needs}, which the stock image lacks: build FROM this Dockerfile")
        for line in summary.stock_dockerfile.splitlines():
            click.echo(f"    {line}")
    click.echo("Ctrl-C to stop.")
