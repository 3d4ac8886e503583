"""`modelship serve`: run a local Triton server on a model repository until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

from export.cli import GuardedCommand, emit_json, json_option
from serve.client import TritonClient
from serve.publish import DEFAULT_REPO
from serve.server import TritonServer, production_command


@click.command("serve", cls=GuardedCommand)
@click.option(
    "--repo",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=DEFAULT_REPO,
    show_default=True,
    help="Triton model repository to serve.",
)
@click.option("--http-port", type=int, default=8000, show_default=True, help="HTTP/REST port.")
@click.option("--grpc-port", type=int, default=8001, show_default=True, help="gRPC port.")
@click.option("--metrics-port", type=int, default=8002, show_default=True, help="Prometheus metrics port.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. 0.0.0.0 exposes the server to the network.",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="NAME",
    help="Load only this model (explicit model control; repeat). Default: every model in the repository.",
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where Triton's own log goes (default: a new file under the temp folder; its path is printed).",
)
@click.option("--verbose", is_flag=True, help="Triton's verbose log on this terminal instead of a log file.")
@json_option
def serve_command(
    repo: Path,
    http_port: int,
    grpc_port: int,
    metrics_port: int,
    host: str,
    models: tuple[str, ...],
    log_file: Path | None,
    verbose: bool,
    as_json: bool,
) -> None:
    """Serve a model repository with a local Triton Inference Server (2.51, from nvidia-pytriton) until Ctrl-C.

    ONNX and TorchScript models run through modelship's Python-based `onnxruntime` and `pytorch` backends (the
    stock container uses Triton's native ones on the same repository; the equivalent command is printed).
    """
    server = TritonServer(
        repo,
        host=host,
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        explicit_models=list(models) or None,
        log_file=log_file,
        verbose=verbose,
    )
    stop = threading.Event()

    def request_stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, request_stop)
    click.echo(f"starting tritonserver on {repo} ...", err=True)
    server.start()
    try:
        with TritonClient(server.http_url) as client:
            loaded = client.models()
        summary = {
            "ok": True,
            "repo": str(server.repo),
            "http": server.http_url,
            "grpc": server.grpc_url,
            "metrics": server.metrics_url,
            "models": loaded,
            "startup_s": round(server.startup_s or 0.0, 2),
            "log_file": None if verbose else str(server.log_file),
            "production_command": production_command(server.repo, http_port, grpc_port, metrics_port),
        }
        if as_json:
            emit_json(summary)
        else:
            _print_summary(summary)
        while not stop.wait(0.5):
            if not server.running:  # not a ModelshipError: with --json, stdout already holds its one object
                click.secho(f"error: tritonserver exited unexpectedly (see {server.log_file})", fg="red", err=True)
                raise click.exceptions.Exit(1)
    except KeyboardInterrupt:
        pass
    finally:
        click.echo("stopping tritonserver ...", err=True)
        server.stop()
        signal.signal(signal.SIGTERM, previous)


def _print_summary(summary: dict) -> None:
    click.echo(f"Triton ready in {summary['startup_s']} s")
    click.echo(f"  HTTP     {summary['http']}")
    click.echo(f"  gRPC     {summary['grpc']}")
    click.echo(f"  metrics  {summary['metrics']}")
    click.echo(f"  models   ({len(summary['models'])})")
    for model in summary["models"]:
        click.echo(f"    {model['name']:<40} v{model.get('version', '?'):<4} {model.get('state', '')}")
    if summary["log_file"]:
        click.echo(f"  log      {summary['log_file']}")
    click.echo("Production equivalent (GPU host, stock container with native backends):")
    click.echo(f"  {summary['production_command']}")
    click.echo("Ctrl-C to stop.")
