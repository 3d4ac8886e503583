"""Serving efficiency (the headline): throughput through a local Triton over gRPC and binary HTTP, at batch 1 and 8
and several concurrencies, divided by in-process ONNX Runtime throughput on the same inputs with the same session
settings, in a process of its own that never ran torch (measure.InProcess). Each point is measured in interleaved
pairs (served, in-process, served, ...: repeated.interleaved) and reported as the median ratio with its range,
flagged when it cannot be true (served faster than in-process) or stays imprecise. The peers (peer.PEERS: the
do-it-yourself FastAPI + uvicorn + ONNX Runtime server, PyTriton around the same session) are measured the same way
at the same points, with modelship / peer beside them. A model whose speed depends on the process it runs in (a 1 ms
inference: `BenchPlan.rounds_for`) has its points spread over rounds, each with a fresh server, worker and
peers (repeated.Round). perf_analyzer measures one point as well, interleaved with the load generator, to show both
agree."""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypedDict

from modelship.bench.measure import InProcess, latency_notes, served, standalone_throughput
from modelship.bench.peer import PEERS, Peer, PeerProcess
from modelship.bench.perf_analyzer import PerfAnalyzerUnavailable, ensure_perf_analyzer
from modelship.bench.repeated import PointsInRound, RepeatedPoint, Round, interleaved
from modelship.bench.report import Row
from modelship.bench.tuning import set_intra_op_threads
from modelship.bench.workspace import GRPC, MODELS, BenchPlan, LoadProtocol, Workspace, sample_inputs
from modelship.serve.load.loadgen import run_load
from modelship.serve.load.stats import LoadStats
from modelship.serve.server import TritonServer


class PerfPoint(TypedDict):
    """The point perf_analyzer measures."""

    batch: int
    concurrency: int
    protocol: LoadProtocol


SUITE = "serving"
PA_POINT: PerfPoint = {"batch": 8, "concurrency": 4, "protocol": GRPC}
STANDALONE_RATIO = "bench's in-process worker / a standalone program"
BASELINE_TOLERANCE = 0.05
# perf_analyzer's own stability rule (3 windows within 20%) failed on this machine's noise and killed the row; the
# interleaved pairs judge stability here, so perf_analyzer only has to finish. With 5 trials it still failed on
# 2026-12-04 (resnet50 b8 c4: about 20 requests per 3 s window); 10 is perf_analyzer's own default
PA_STABILITY_PERCENT = 50
PA_MAX_TRIALS = 10


def run(ws: Workspace) -> list[Row]:
    plan = ws.plan
    missing = {peer: peer.unavailable() for peer in PEERS}
    peers = [peer for peer, why in missing.items() if why is None]
    rows = []
    for key in plan.serving_models:
        repo = ws.repo(f"{SUITE}-{key}")
        model = ws.publish(repo, key)
        threads = MODELS[key].serving_threads
        if threads is not None:
            set_intra_op_threads(repo / model, threads)
        rounds = plan.rounds_for(key)
        points: dict[str, RepeatedPoint] = {}
        for index in range(rounds):
            loads: dict[tuple, Callable[[], LoadStats]] = {}
            with TritonServer(repo) as server:
                in_round = PointsInRound(Round(index, rounds), points)
                model_rows = _model_rows(ws, server, key, model, loads, peers, in_round)
                if key == plan.main_model and index == rounds - 1:
                    cross_check = _cross_check(ws, server, model, loads)
        rows += model_rows  # the last round's rows hold every round's pairs
        rows += [_no_peerpoint_row(key, peer, why) for peer, why in missing.items() if why is not None]
    return [*rows, cross_check]


def _model_rows(
    ws: Workspace,
    server: TritonServer,
    key: str,
    model: str,
    loads: dict[tuple, Callable[[], LoadStats]],
    peers: list[Peer],
    points: PointsInRound,
) -> list[Row]:
    """Every point of one model in one round: served over each protocol and concurrency, then each peer, each
    against the in-process worker in interleaved pairs, continuing the points of the rounds before. Each served
    point's load goes into `loads` (for the cross-check)."""
    plan = ws.plan
    point_plan = replace(plan, window_s=plan.point_window_s)
    path = ws.export(key).artifact_path("onnx")
    threads = MODELS[key].serving_threads
    rounds = f", round {points.in_round.index + 1} of {points.in_round.of}" if points.in_round.of > 1 else ""
    rows = []
    with InProcess(path, threads) as inprocess, contextlib.ExitStack() as stack:
        started = []
        for peer in peers:
            try:
                started.append((peer, stack.enter_context(peer.start(path, threads))))
            except RuntimeError as exc:  # a peer that cannot start gets a row saying so; the suite goes on
                rows.append(_no_peerpoint_row(key, peer, str(exc)))
        for batch in plan.batches:
            inputs = sample_inputs(ws.export(key), batch)
            outputs = inprocess.outputs(inputs)
            baseline = functools.partial(inprocess.measure, inputs, point_plan)
            for protocol, concurrency in itertools.product(plan.protocols, plan.concurrencies[key]):
                ws.log(f"serving: {key} batch {batch} concurrency {concurrency} {protocol}{rounds}")
                send = loads[key, batch, concurrency, protocol] = functools.partial(
                    served, server, protocol, model, inputs, outputs, point_plan, concurrency=concurrency
                )
                case = f"{key} onnx b{batch} c{concurrency} {protocol}"
                point = points.measure(case, send, baseline, plan.repetition)
                rows.append(point_row(case, point, plan, threads=threads))
            at = BatchPoint(key, batch, inputs, outputs, baseline)
            for peer, process in started:
                rows += _peer_rows(ws, peer, process, at, loads, points)
            if batch == plan.batches[0]:
                ws.log(f"serving: in-process baseline vs a standalone program, {key} batch {batch}{rounds}")
                alone = functools.partial(standalone_throughput, path, inputs, point_plan, threads)
                case = f"{key} onnx b{batch} c1 in-process baseline"
                check = points.measure(case, baseline, alone, plan.baseline_repetition)
                flags = check.unstable()
                if abs(check.ratio - 1) > BASELINE_TOLERANCE:
                    flags.append(f"baseline off: {check.ratio:.2f}x a standalone program (> 5% apart)")
                rows.append(point_row(case, check, plan, STANDALONE_RATIO, flags=flags, threads=threads, better="one"))
    return rows


def point_row(
    case: str,
    point: RepeatedPoint,
    plan: BenchPlan,
    ratio_of: str = "served / in-process throughput",
    *,
    flags: list[str] | None = None,
    threads: int | None = None,
    suite: str = SUITE,
    unit: str = "inf/s",
    better: str = "higher",
) -> Row:
    """A row of a served / in-process point (`flags`: its own, for rows that compare something else; `threads`:
    the model's serving_threads, said in the notes; `suite` and `unit` for another suite's point; `better`: which
    way its ratio improves, report.BETTER)."""
    notes = f"{point.describe()}; {latency_notes(point.median_served)}"
    if threads is not None:
        notes += f"; {threads} intra-op thread(s) on every side"
    if plan.quick:
        notes += "; --quick: indicative"
    return Row(
        suite,
        case,
        point.ratio,
        ratio_of,
        point.served_throughput,
        point.baseline_throughput,
        unit,
        notes,
        point.to_dict(),
        point.flags() if flags is None else flags,
        better,
    )


def _no_peerpoint_row(key: str, peer: Peer, why: str) -> Row:
    return Row(SUITE, f"{key} onnx {peer.label}", None, "modelship / peer", None, None, "", why)


@dataclass(frozen=True)
class BatchPoint:
    """One model at one batch size: its inputs, the in-process outputs they must give, and the in-process side."""

    key: str
    batch: int
    inputs: dict
    outputs: dict
    baseline: Callable[[], LoadStats]


def _peer_rows(
    ws: Workspace,
    peer: Peer,
    process: PeerProcess,
    at: BatchPoint,
    loads: dict[tuple, Callable[[], LoadStats]],
    points: PointsInRound,
) -> list[Row]:
    """A peer at the same concurrencies: its served / in-process, then modelship gRPC / peer measured in direct
    interleaved pairs (modelship, peer, modelship, ...), not as a quotient of two medians, which carries both
    points' noise."""
    plan = ws.plan
    threads = MODELS[at.key].serving_threads
    rows = []
    for concurrency in [c for c in plan.concurrencies[at.key] if c in plan.peer_concurrencies]:
        ws.log(f"serving: {peer.label} {at.key} batch {at.batch} concurrency {concurrency}")
        load = functools.partial(
            run_load,
            peer.requests(process, at.inputs, at.outputs),
            concurrency=concurrency,
            batch=at.batch,
            duration_s=plan.point_window_s,
            max_requests=plan.max_requests,
            warmup=2,
            warmup_s=plan.warmup_s,
            source=peer.label,
        )
        case = f"{at.key} onnx b{at.batch} c{concurrency}"
        label = f"{case} {peer.label} ({peer.protocol})"
        ours = loads.get((at.key, at.batch, concurrency, GRPC))
        try:
            point = points.measure(label, load, at.baseline, plan.repetition)
            rows.append(point_row(label, point, plan, threads=threads))
            if ours is not None:
                ws.log(f"serving: modelship gRPC vs {peer.label} {at.key} batch {at.batch} concurrency {concurrency}")
                versus = f"{case} grpc vs {peer.label}"
                direct = points.measure(versus, ours, load, plan.repetition)
                ratio_of = "modelship gRPC / peer throughput (direct pairs)"
                rows.append(point_row(versus, direct, plan, ratio_of, flags=direct.unstable()))
        except (RuntimeError, OSError) as exc:  # the peer failed: its row says why, the suite goes on
            why = f"the peer failed: {exc}; its log: {process.last_error()}"
            rows.append(Row(SUITE, label, None, "served / in-process throughput", None, None, "inf/s", why))
    return rows


def _cross_check(ws: Workspace, server: TritonServer, model: str, loads: dict[tuple, Callable[[], LoadStats]]) -> Row:
    """perf_analyzer and the Python load generator on the same point, in interleaved pairs: both numbers and the
    median of their ratios."""
    plan = ws.plan
    key = plan.main_model
    point: PerfPoint = {
        **PA_POINT,
        "concurrency": max(c for c in plan.concurrencies[key] if c <= PA_POINT["concurrency"]),
    }
    case = f"{key} onnx b{point['batch']} c{point['concurrency']} {point['protocol']} perf_analyzer vs loadgen"
    ratio_of = "perf_analyzer / loadgen throughput"
    ours = loads[key, point["batch"], point["concurrency"], point["protocol"]]
    try:
        analyzer = ensure_perf_analyzer()
    except PerfAnalyzerUnavailable as exc:
        return Row(SUITE, case, None, ratio_of, None, None, "inf/s", str(exc), better="one")
    theirs = functools.partial(
        analyzer.measure,
        model=model,
        url=server.grpc_url,
        protocol=point["protocol"].wire,
        batch=point["batch"],
        concurrency=point["concurrency"],
        window_ms=plan.pa_window_ms,
        stability_percent=PA_STABILITY_PERCENT,
        max_trials=PA_MAX_TRIALS,
    )
    ws.log(f"serving: {case}")
    try:  # perf_analyzer's own stability trials make each of its measurements long: fewer pairs
        pairs = interleaved(theirs, ours, replace(plan.repetition, max_pairs=max(plan.repetition.min_pairs, 5)))
    except RuntimeError as exc:
        return Row(SUITE, case, None, ratio_of, None, None, "inf/s", str(exc), better="one")
    return Row(
        SUITE,
        case,
        pairs.ratio,
        ratio_of,
        pairs.served_throughput,
        pairs.baseline_throughput,
        "inf/s",
        f"{pairs.describe()}; perf_analyzer {latency_notes(pairs.median_served)}",
        pairs.to_dict(),
        pairs.unstable(),
        better="one",
    )
