"""`modelship bench`: export, parity and serving benchmarks as one table of ratios (benchmarks/README.md)."""

from __future__ import annotations

import tempfile
import time
from datetime import datetime
from pathlib import Path

import click

from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console
from modelship.contract.errors import UsageError

DEFAULT_OUT = Path("benchmarks/results")
TABLE_WIDTH = 200


@click.command("bench", cls=GuardedCommand)
@click.option("--quick", is_flag=True, help="Small model, short windows, fewer pairs: indicative, about 10 min.")
@click.option(
    "--suite",
    "suites",
    multiple=True,
    metavar="NAME",
    help="Run only this suite (repeatable): export, serving, batching, transport, startup, growth, tuning "
    "(tuning is opt-in). Default: all but tuning.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_OUT,
    show_default=True,
    help="Folder for <date>.json (and <date>.png, the cost-growth plot); --quick writes <date>-quick.*.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep checkpoints, exports and model repositories here (default: a temporary folder, removed after).",
)
@json_option
def bench_command(quick: bool, suites: tuple[str, ...], out_dir: Path, work_dir: Path | None, as_json: bool) -> None:
    """Benchmark the tool: every figure is a ratio of two measurements taken side by side in this run.

    \b
    export     export-model per step vs bare torch/onnx/onnxruntime calls; parity overhead
    serving    Triton over gRPC/HTTP vs in-process ONNX Runtime, batch 1 and 8, concurrency 1-8;
               perf_analyzer 2.51 vs the Python load generator on one point
    batching   dynamic batching on vs off, single-image requests at concurrency 8
    transport  gRPC vs binary HTTP vs system shared memory, 8x3x224x224 fp32
    startup    server start to ready vs loading the same files in-process
    growth     parity/serving cost vs model size and batch size (+ PNG plot)
    tuning     (opt-in) ORT threads and optimisation level, instances, queue delay, JSON vs binary
    """
    from modelship.bench.plot import plot_cost_growth
    from modelship.bench.report import Report, machine_info, render_table, result_stem, write_json
    from modelship.bench.suites import DEFAULT_SUITES, SUITES, suite
    from modelship.bench.workspace import Plan, Workspace

    unknown = sorted(set(suites) - set(SUITES))
    if unknown:
        raise UsageError(f"unknown suite(s): {', '.join(unknown)}", hint=f"choose from {', '.join(SUITES)}")
    chosen = [name for name in SUITES if name in suites] if suites else list(DEFAULT_SUITES)
    plan = Plan.quick_plan() if quick else Plan.full()
    console = make_console(stderr=True)
    started = datetime.now()
    began = time.perf_counter()
    rows, errors = [], {}
    with tempfile.TemporaryDirectory(prefix="modelship-bench-") as tmp:
        workspace = Workspace(work_dir or Path(tmp), plan, log=lambda message: console.log(message))
        for name in chosen:
            console.rule(f"{name}: {SUITES[name]}")
            try:
                rows.extend(suite(name)(workspace))
            except Exception as exc:  # one failing suite must not cost the others' figures; it is reported
                errors[name] = f"{type(exc).__name__}: {exc}"
                console.print(f"[red]suite {name} failed: {errors[name]}[/red]")
    report = Report(rows, quick, started.isoformat(timespec="seconds"), time.perf_counter() - began, machine_info())
    report.errors = errors
    stem = result_stem(started, quick=quick, suites=tuple(suites and chosen))
    figure = plot_cost_growth([r for r in rows if r.suite == "growth"], out_dir / f"{stem}.png")
    if figure is not None:
        report.figures.append(str(figure))
    path = write_json(report, out_dir / f"{stem}.json")
    if as_json:
        emit_json({"ok": not errors, "json": str(path), **report.to_dict()})
    else:
        out = make_console()
        if not out.is_terminal:  # piped or redirected: do not fold the table into 80 columns
            out.width = TABLE_WIDTH
        out.print(render_table(report))
        click.echo(f"results: {path}" + (f", plot: {figure}" if figure else ""))
        for name, message in errors.items():
            click.secho(f"suite {name} failed: {message}", fg="red", err=True)
    if errors:
        raise click.exceptions.Exit(1)
