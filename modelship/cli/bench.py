"""`modelship bench`: export, parity and serving benchmarks as one table of ratios, compared with a committed
baseline on request (benchmarks/README.md)."""

from __future__ import annotations

import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console
from modelship.contract.errors import UsageError

if TYPE_CHECKING:
    from modelship.bench.baseline import Baseline
    from modelship.bench.compare import Comparison
    from modelship.bench.report import Report

TABLE_WIDTH = 200


@click.command("bench", cls=GuardedCommand)
@click.option(
    "--quick",
    is_flag=True,
    help="The quick plan: serving (small model, gRPC, each peer at concurrency 1) and shared-memory transport, "
    "about 3 min.",
)
@click.option(
    "--suite",
    "suites",
    multiple=True,
    metavar="NAME",
    help="Run only this suite (repeatable): export, serving, transport, pipeline, fleet, vision, text, precision, "
    "tune. Default: all but tune, which runs only when named (--quick: serving, transport); with --against, the "
    "baselines' suites.",
)
@click.option(
    "--against",
    "against",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    metavar="BASELINE",
    help="Compare with a baseline (repeatable): a file, or a folder of <suite>[-quick].json such as "
    "benchmarks/baselines. Marks each row that moved beyond its spread; exits 1 on a regression.",
)
@click.option(
    "--save-baseline",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    default=None,
    help="Write this run's baseline, one <suite>[-quick].json per suite, into DIR (e.g. benchmarks/baselines).",
)
@click.option(
    "--from-run",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="RUN_JSON",
    default=None,
    help="Measure nothing: compare or save a baseline from a run's JSON that `modelship bench` wrote earlier.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    default=None,
    help="Folder for the run's JSON, <date>-<time>[-quick][-<suites>].json "
    "[default: $XDG_CACHE_HOME/modelship/bench, else ~/.cache/modelship/bench].",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    default=None,
    help="Keep checkpoints, exports and model repositories here (default: a temporary folder, removed after).",
)
@json_option
def bench_command(
    quick: bool,
    suites: tuple[str, ...],
    against: tuple[Path, ...],
    save_baseline: Path | None,
    from_run: Path | None,
    out_dir: Path | None,
    work_dir: Path | None,
    as_json: bool,
) -> None:
    """Benchmark the tool: every figure is a ratio of two measurements taken side by side in this run.

    \b
    export     export-model per step vs bare torch/onnx/onnxruntime calls; parity overhead
    serving    Triton over gRPC/HTTP vs in-process ONNX Runtime, batch 1 and 8, concurrency 1-8; the FastAPI
               and PyTriton peers; perf_analyzer 2.51 vs the Python load generator on one point
    transport  gRPC vs binary HTTP vs system shared memory, 8x3x224x224 fp32
    pipeline   a JPEG in, logits out: server-side preprocessing vs the same work in-process
    fleet      rollout from S3 vs a folder, 1 and 3 servers; 2 servers round robin vs 1
    vision     segmentation and detection pipelines vs the same work in-process
    text       the MiniLM text pipeline (tokenization on the server) vs in-process
    precision  INT8 and fp16 vs fp32 in-process (resnet50, mobilenet_v3_large, the real EfficientNet-Lite0 and
               MobileNetV2, MiniLM) beside their accuracy; served resnet50 INT8 vs served fp32
    tune       modelship tune's search vs brute force on one grid (best throughput within p99 200 ms, points,
               minutes); only when named: --suite tune

    \b
    modelship bench --suite serving --quick --against benchmarks/baselines
    modelship bench --suite serving --quick --save-baseline benchmarks/baselines
    """
    from modelship.bench.baseline import Baseline
    from modelship.bench.compare import compare_all
    from modelship.bench.report import read_json, results_dir

    if from_run is not None and (quick or suites or out_dir or work_dir):
        raise UsageError(
            "--from-run measures nothing: its mode and suites are the run's",
            hint="drop --quick, --suite, --out, --work-dir",
        )
    if from_run is not None:
        report = read_json(from_run)
        baselines = _baselines(against, report.suites, report.quick)
        path = from_run
    else:
        _check_suites(suites, "in --suite")
        baselines = _baselines(against, suites, quick)
        report = _measure(_chosen(suites, quick, baselines), quick, work_dir)
        path = _write_run(report, out_dir or results_dir())
    current = Baseline.from_report(report)
    saved = _save_baselines(current, report, save_baseline) if save_baseline is not None else []
    comparison = compare_all(baselines, current) if baselines else None
    ok = not report.errors and (comparison is None or comparison.ok)
    if as_json:
        emit_json(
            {
                "ok": ok,
                "json": str(path),
                **report.to_dict(),
                "baselines_saved": [str(p) for p in saved],
                "comparison": None if comparison is None else comparison.to_dict(),
            }
        )
    else:
        _print(report, path, saved, comparison)
    if not ok:
        raise click.exceptions.Exit(1)


def _chosen(suites: tuple[str, ...], quick: bool, baselines: list[Baseline]) -> list[str]:
    """The suites to run, in SUITES order: those asked for, else the baselines', else the mode's default."""
    from modelship.bench.suites import ON_REQUEST, QUICK_SUITES, SUITES

    if suites:
        wanted = set(suites)
    elif baselines:
        wanted = {suite for baseline in baselines for suite in baseline.suites}
    else:
        wanted = set(QUICK_SUITES if quick else SUITES) - set(ON_REQUEST)
    return [name for name in SUITES if name in wanted]


def _check_suites(names: tuple[str, ...] | list[str], where: str) -> None:
    from modelship.bench.suites import SUITES

    unknown = sorted(set(names) - set(SUITES))
    if unknown:
        raise UsageError(f"unknown suite(s) {where}: {', '.join(unknown)}", hint=f"choose from {', '.join(SUITES)}")


def _baselines(paths: tuple[Path, ...], suites: tuple[str, ...] | list[str], quick: bool) -> list[Baseline]:
    """The baselines `--against` names: each file, and from each folder the file of every suite that runs (all of
    this mode's suites when none is asked for) that has one. A baseline of the other mode is refused."""
    from modelship.bench.baseline import baseline_file, read_baseline
    from modelship.bench.suites import QUICK_SUITES, SUITES

    files = []
    for path in paths:
        if path.is_dir():
            names = suites or (QUICK_SUITES if quick else SUITES)
            found = [
                path / baseline_file(name, quick) for name in names if (path / baseline_file(name, quick)).is_file()
            ]
            if not found:
                raise UsageError(
                    f"{path} has no {'--quick ' if quick else ''}baseline for {', '.join(names)}",
                    hint="make one with --save-baseline DIR",
                )
            files += found
        else:
            files.append(path)
    baselines = []
    for file in files:
        try:
            baseline = read_baseline(file)
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{file} is not a modelship bench baseline: {exc}") from None
        if baseline.quick != quick:
            mode = "a --quick" if baseline.quick else "a full"
            raise UsageError(f"{file} is {mode} baseline", hint="add --quick" if baseline.quick else "drop --quick")
        _check_suites(baseline.suites, f"in {file}")
        baselines.append(baseline if not suites else _restricted(baseline, suites))
    return baselines


def _restricted(baseline: Baseline, suites: tuple[str, ...] | list[str]) -> Baseline:
    """`baseline` cut to the suites that run (a baseline of several suites, only some asked for)."""
    from dataclasses import replace

    kept = tuple(suite for suite in baseline.suites if suite in suites)
    return replace(baseline, suites=kept, rows=tuple(row for row in baseline.rows if row.suite in kept))


def _measure(chosen: list[str], quick: bool, work_dir: Path | None) -> Report:
    from modelship.bench.report import Report, machine_info
    from modelship.bench.suites import SUITES, suite
    from modelship.bench.workspace import BenchPlan, Workspace

    plan = BenchPlan.quick_plan() if quick else BenchPlan.full()
    console = make_console(stderr=True)
    started = datetime.now()
    began = time.perf_counter()
    rows, errors, timed = [], {}, {}
    with tempfile.TemporaryDirectory(prefix="modelship-bench-") as tmp:
        workspace = Workspace(work_dir or Path(tmp), plan, log=lambda message: console.log(message))
        for name in chosen:
            console.rule(f"{name}: {SUITES[name]}")
            suite_began = time.perf_counter()
            try:
                rows.extend(suite(name)(workspace))
            except Exception as exc:  # one failing suite must not cost the others' figures; it is reported
                errors[name] = f"{type(exc).__name__}: {exc}"
                console.print(f"[red]suite {name} failed: {errors[name]}[/red]")
            timed[name] = time.perf_counter() - suite_began
    seconds = time.perf_counter() - began
    stamp = started.isoformat(timespec="seconds")
    return Report(rows, quick, stamp, seconds, machine_info(), errors, chosen, timed)


def _write_run(report: Report, out_dir: Path) -> Path:
    """`out_dir/<stem>.json`, the suites in the name unless they are the mode's default."""
    from modelship.bench.report import result_stem, write_json
    from modelship.bench.suites import QUICK_SUITES, SUITES

    default = QUICK_SUITES if report.quick else tuple(SUITES)
    suites = () if tuple(report.suites) == default else tuple(report.suites)
    stem = result_stem(datetime.fromisoformat(report.started), quick=report.quick, suites=suites)
    return write_json(report, out_dir / f"{stem}.json")


def _save_baselines(current: Baseline, report: Report, folder: Path) -> list[Path]:
    """One baseline file per suite that ran without failing."""
    from modelship.bench.baseline import baseline_file, write_baseline

    return [
        write_baseline(
            current.only(suite, report.suite_seconds.get(suite)), folder / baseline_file(suite, report.quick)
        )
        for suite in report.suites
        if suite not in report.errors
    ]


def _print(report: Report, path: Path, saved: list[Path], comparison: Comparison | None) -> None:
    from modelship.bench.compare import render_comparison
    from modelship.bench.report import render_table

    out = make_console()
    if not out.is_terminal:  # piped or redirected: do not fold the table into 80 columns
        out.width = TABLE_WIDTH
    out.print(render_table(report))
    click.echo(f"results: {path}")
    for file in saved:
        click.echo(f"baseline: {file}")
    for name, message in report.errors.items():
        click.secho(f"suite {name} failed: {message}", fg="red", err=True)
    if comparison is not None:
        out.print(render_comparison(comparison))
        for note in comparison.notes:
            click.secho(f"note: {note}", fg="yellow")
        for change in comparison.changes:
            if change.status != "same":
                click.echo(f"{change.status}: {change.describe()}")
        click.echo(comparison.summary())
        for change in comparison.regressions:
            click.secho(f"regression: {change.describe()}", fg="red", err=True)
