"""`modelship tune NAME --p99-ms B`: which of NAME's artifacts serves, and with which config, chosen by measurement
under a latency budget (serve.tune), on the local server or any Triton reached through --url."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console
from modelship.cli.numbers import at_least_zero, count, positive
from modelship.cli.server_flags import repo_option, url_option
from modelship.serve.tune.constraints import Constraints

if TYPE_CHECKING:
    from modelship.contract.json_object import JsonObject
    from modelship.serve.tune.run import TuneResult

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
    help="Inferences/s the config must reach within the p99 budget (0: no floor).",
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
    measured again against the default, interleaved, and kept only if it holds. When no config meets both the p99
    budget and --min-throughput, tune refuses (exit 1), naming the closest point on each. Every config changed on
    the server is restored on exit (after a kill, by the next tune). Prints a table of every point; writes
    OUT/tune.json and OUT/tune.png.

    \b
    Examples:
      modelship tune resnet50_onnx --p99-ms 200
      modelship tune resnet50_pipeline --p99-ms 300 --apply
      modelship tune resnet50_onnx --url http://127.0.0.1:8000 --api-key-file KEY --p99-ms 50 --json
    """
    from modelship.serve.tune.local import Server
    from modelship.serve.tune.report import save
    from modelship.serve.tune.run import TuneRequest, tune_on

    server = Server(repo, url, api_key_file.read_text().strip() if api_key_file else None)
    request = TuneRequest(
        model,
        Constraints(p99_ms, min_throughput),
        server.cores(server_cores),
        time_budget_s=minutes * 60,
        max_concurrency=max_concurrency,
        window_s=window_s,
        apply=apply,
    )
    result = tune_on(server, request, make_console(stderr=True).log)
    payload = save(result, out)
    result.require_met(payload["report"])
    if as_json:
        emit_json(payload)
        return
    _print(result, payload)


def _print(result: TuneResult, payload: JsonObject) -> None:
    from modelship.serve.tune.report import points_table

    console = make_console()
    console.print(points_table(result))
    best = result.winner.best
    assert best is not None  # require_met refused otherwise
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
