"""`modelship tune NAME --p99-ms B`: which of NAME's artifacts serves, and with which config, chosen by measurement
under a latency budget (serve.tune), on the local server or any Triton reached through --url."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console
from modelship.cli.numbers import at_least_zero, count, positive
from modelship.cli.server_flags import repo_option, url_option
from modelship.contract.errors import TuneError, UsageError
from modelship.serve.tune.measurement import Budget

if TYPE_CHECKING:
    from modelship.serve.client import TritonClient
    from modelship.serve.tune.run import Progress, TuneRequest, TuneResult

MAX_MS = 3_600_000.0  # an hour: a p99 budget past it is a typo
MAX_THROUGHPUT = 1e7  # inferences/s
MAX_MINUTES = 24 * 60.0  # a day's search
MAX_CLIENTS = 1024  # concurrent load threads on this machine
MAX_WINDOW_S = 600.0
MAX_CORES = 4096


@click.command("tune", cls=GuardedCommand)
@click.argument("model", metavar="NAME")
@repo_option("whose model is tuned on a local server tune starts (ignored with --url)")
@url_option("--url", "url", "A running Triton to tune instead (started in explicit model-control mode)")
@click.option(
    "--api-key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The --url server's repository-API secret (`modelship serve` prints where it wrote it).",
)
@click.option("--p99-ms", type=positive(MAX_MS), required=True, help="The p99 latency budget, in milliseconds.")
@click.option(
    "--min-throughput",
    type=at_least_zero(MAX_THROUGHPUT),
    default=0.0,
    show_default=True,
    help="Inferences/s the config must reach.",
)
@click.option(
    "--time-budget",
    "minutes",
    type=positive(MAX_MINUTES),
    default=10.0,
    show_default=True,
    help="Minutes the search may take.",
)
@click.option(
    "--max-concurrency",
    type=count(MAX_CLIENTS),
    default=32,
    show_default=True,
    help="Most clients a point is measured at.",
)
@click.option(
    "--window", "window_s", type=positive(MAX_WINDOW_S), default=1.0, show_default=True,
    help="Seconds per measured window.",
)  # fmt: skip
@click.option(
    "--server-cores",
    type=count(MAX_CORES),
    default=None,
    help="The server's CPU cores (instances x threads never exceed them); read here when the server is local.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("tune-report"),
    show_default=True,
    help="Folder for the report: tune.json and the plot tune.png.",
)
@click.option(
    "--apply",
    "apply",
    is_flag=True,
    help="Write the winner into --repo, a folder (publish's journaled commit) or s3:// (publish's lock), and load "
    "it; a tuned _pipeline steps into the winning artifact. Nothing changes when the default wins.",
)
@json_option
def tune_command(
    model: str,
    repo: str,
    url: str | None,
    api_key_file: Path | None,
    p99_ms: float,
    min_throughput: float,
    minutes: float,
    max_concurrency: int,
    window_s: float,
    server_cores: int | None,
    out: Path,
    apply: bool,
    as_json: bool,
) -> None:
    """Measure NAME as published, then search which of its export's artifacts serves (fp32, fp16, INT8 ONNX,
    TorchScript), with how many instances and intra-op threads, the largest batch and the queue delay, each at the
    client concurrency that gives the most throughput within the p99 budget. NAME may be a _pipeline: it is measured
    through its own requests (photos or sentences), its step moved to each candidate artifact. The winner is
    measured again against the default, interleaved, and kept only if it holds. Every config changed on the server
    is restored on exit (after a kill, by the next tune). Prints a table of every point; writes OUT/tune.json and
    OUT/tune.png.

    \b
    Examples:
      modelship tune resnet50_onnx --p99-ms 200
      modelship tune resnet50_pipeline --p99-ms 300 --apply
      modelship tune resnet50_onnx --url http://127.0.0.1:8000 --api-key-file KEY --p99-ms 50 --json
    """
    from modelship.serve.object_store import is_object_store
    from modelship.serve.ports import is_loopback
    from modelship.serve.tune.run import TuneRequest

    if apply and not is_object_store(repo) and not (Path(repo) / model / "config.pbtxt").is_file():
        raise UsageError(f"--apply writes into --repo, and {repo} holds no model {model!r}",
                         hint="pass the --repo folder the server serves")  # fmt: skip
    host = (url or "127.0.0.1").split("://", 1)[-1].rsplit(":", 1)[0]
    cores = server_cores or (os.cpu_count() if is_loopback(host) else None)
    if cores is None:
        raise UsageError(f"tune cannot read the cores of {url} from here", hint="pass --server-cores N")
    request = TuneRequest(model, Budget(p99_ms, min_throughput), cores, minutes * 60, max_concurrency, window_s)
    console = make_console(stderr=True)
    result = _run(request, repo, url, api_key_file, console.log, apply)
    _report(result, out, as_json)


def _run(
    request: TuneRequest, repo: str, url: str | None, api_key_file: Path | None, log: Progress, apply: bool
) -> TuneResult:
    from modelship.serve.client import TritonClient
    from modelship.serve.tune.local import local_server

    if url is not None:
        key = api_key_file.read_text().strip() if api_key_file else None
        with TritonClient(url, api_key=key, concurrency=1) as client:
            return _tune(client, request, repo, log, apply)
    with local_server(Path(repo), request.model, log) as server, server.client() as client:
        return _tune(client, request, repo, log, apply)


def _tune(client: TritonClient, request: TuneRequest, repo: str, log: Progress, apply: bool) -> TuneResult:
    """Tune, then with --apply write the winner into `repo` and load it (and the pipeline over it) from there."""
    from modelship.serve.tune.apply import apply_winner
    from modelship.serve.tune.run import tune

    result = tune(client, request, log)
    if apply and not result.default_wins:
        winner = result.winner.candidate
        result.applied = apply_winner(repo, winner, result.pipeline)
        loaded = [winner.artifact] + ([result.pipeline] if result.pipeline and len(result.applied) > 1 else [])
        for model in loaded:
            client.load(model)
        log(f"applied: {', '.join(result.applied)}; {', '.join(loaded)} loaded from there")
    return result


def _report(result: TuneResult, out: Path, as_json: bool) -> None:
    import json

    from modelship.serve.tune.report import PLOT, plot, points_table

    payload = result.to_dict()
    out.mkdir(parents=True, exist_ok=True)
    payload["plot"] = str(plot(result, out / PLOT))
    payload["report"] = str(out / "tune.json")
    (out / "tune.json").write_text(json.dumps(payload, indent=2))
    winner = result.winner
    if winner.best is None:
        closest = min(result.search.points, key=lambda p: p.p99_ms)
        raise TuneError(
            f"no config of {result.request.model} meets p99 {result.request.budget.p99_ms:g} ms"
            + (f" at {result.request.budget.min_throughput:g}/s" if result.request.budget.min_throughput else "")
            + f"; the closest: {closest.candidate.describe()} at {closest.concurrency} clients, p99 "
            f"{closest.p99_ms:.1f} ms, {closest.throughput:.1f}/s",
            hint=f"raise --p99-ms; every point is in {out / 'tune.json'}",
        )
    if as_json:
        emit_json(payload)
        return
    console = make_console()
    console.print(points_table(result))
    best = winner.best
    if result.default_wins:
        console.print(f"the default wins: {best.candidate.describe()}, {best.throughput:.1f}/s at {best.concurrency} "
                      f"clients, p99 {best.p99_ms:.1f} ms; nothing changed")  # fmt: skip
    else:
        assert result.confirmation is not None
        console.print(
            f"winner: {best.candidate.describe()}, {best.throughput:.1f}/s at {best.concurrency} clients, p99 "
            f"{best.p99_ms:.1f} ms: {result.confirmation.ratio:.2f}x the default's throughput (median of "
            f"{len(result.confirmation.rounds)} interleaved rounds)"
            + (f"; written to {', '.join(result.applied)}" if result.applied else "; --apply writes it")
        )
    searched = f"{len(result.search.evaluations)} configs, {result.search.measured} points"
    console.print(f"{searched} measured in {result.seconds / 60:.1f} min; plot: {payload['plot']}; {payload['report']}")
