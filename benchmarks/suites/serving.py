"""Serving efficiency (the headline): throughput through a local Triton over gRPC and binary HTTP, at batch 1 and 8
and several concurrencies, divided by in-process ONNX Runtime throughput on the same inputs with the same session
settings, in a process of its own that never ran torch (measure.InProcess). Each point is measured in interleaved
pairs (served, in-process, served, ...: repeated.interleaved) and reported as the median ratio with its range,
flagged when it cannot be true (served faster than in-process) or spreads too wide. The do-it-yourself peer
(FastAPI + uvicorn + ONNX Runtime, peer_server) is measured the same way at the same points, with modelship / peer
beside it. perf_analyzer measures one point as well, to show both load generators agree."""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable
from dataclasses import replace

from modelship.bench.loadgen import run_load
from modelship.bench.measure import InProcess, latency_notes, served, standalone_throughput
from modelship.bench.peer import PeerServer, peer_sender, peer_unavailable
from modelship.bench.perf_analyzer import PerfAnalyzerUnavailable, ensure_perf_analyzer
from modelship.bench.repeated import RepeatedPoint, interleaved
from modelship.bench.report import Row
from modelship.bench.stats import LoadStats, ratio
from modelship.bench.workspace import Plan, Workspace, sample_inputs
from modelship.serve.server import TritonServer

SUITE = "serving"
PA_POINT = {"batch": 8, "concurrency": 4, "protocol": "grpc"}
PEER = "fastapi peer"
PEER_CONCURRENCIES = (1, 4)  # where modelship is compared with the peer
STANDALONE_RATIO = "bench's in-process worker / a standalone program"
BASELINE_TOLERANCE = 0.05


def run(ws: Workspace) -> list[Row]:
    plan = ws.plan
    repo = ws.repo(SUITE)
    names = {key: ws.publish(repo, key) for key in plan.serving_models}
    rows = []
    measured: dict[tuple, LoadStats] = {}
    missing_peer = peer_unavailable()
    with TritonServer(repo) as server:
        for key in plan.serving_models:
            rows += _model_rows(ws, server, key, names[key], measured, with_peer=missing_peer is None)
            if missing_peer is not None:
                rows.append(Row(SUITE, f"{key} onnx {PEER}", None, "modelship / peer", None, None, "", missing_peer))
        rows.append(_cross_check(ws, server, names[plan.main_model], measured))
    return rows


def _model_rows(
    ws: Workspace, server: TritonServer, key: str, model: str, measured: dict[tuple, LoadStats], *, with_peer: bool
) -> list[Row]:
    """Every point of one model: served over each protocol and concurrency, then the peer, each against the
    in-process worker in interleaved pairs."""
    plan = ws.plan
    point_plan = replace(plan, window_s=plan.point_window_s)
    path = ws.export(key).artifact_path("onnx")
    rows = []
    with InProcess(path) as inprocess, PeerServer(path) if with_peer else contextlib.nullcontext() as peer:
        for batch in plan.batches:
            inputs = sample_inputs(ws.export(key), batch)
            outputs = inprocess.outputs(inputs)
            baseline = functools.partial(inprocess.measure, inputs, point_plan)
            points: dict[tuple[str, int], RepeatedPoint] = {}
            for protocol, concurrency in itertools.product(plan.protocols, plan.concurrencies[key]):
                ws.log(f"serving: {key} batch {batch} concurrency {concurrency} {protocol}")
                send = functools.partial(
                    served, server, protocol, model, inputs, outputs, point_plan, concurrency=concurrency
                )
                point = points[protocol, concurrency] = interleaved(send, baseline, plan.repetitions)
                measured[key, batch, concurrency, protocol] = point.median_served
                rows.append(_row(f"{key} onnx b{batch} c{concurrency} {protocol}", point, plan))
            if peer is not None:
                rows += _peer_rows(ws, peer, key, batch, inputs, baseline, points)
            if batch == plan.batches[0]:
                ws.log(f"serving: in-process baseline vs a standalone program, {key} batch {batch}")
                alone = functools.partial(standalone_throughput, path, inputs, plan.point_window_s)
                check = interleaved(baseline, alone, plan.repetitions)
                flags = check.unstable(plan.max_spread)
                if abs(check.ratio - 1) > BASELINE_TOLERANCE:
                    flags.append(f"baseline off: {check.ratio:.2f}x a standalone program (> 5% apart)")
                case = f"{key} onnx b{batch} c1 in-process baseline"
                rows.append(_row(case, check, plan, STANDALONE_RATIO, flags=flags))
    return rows


def _row(
    case: str,
    point: RepeatedPoint,
    plan: Plan,
    ratio_of: str = "served / in-process throughput",
    *,
    flags: list[str] | None = None,
) -> Row:
    """A row of a served / in-process point (`flags`: its own, for rows that compare something else)."""
    notes = f"{point.describe()}; {latency_notes(point.median_served)}"
    if plan.quick:
        notes += "; --quick: indicative"
    return Row(
        SUITE,
        case,
        point.ratio,
        ratio_of,
        point.served_throughput,
        point.baseline_throughput,
        "inf/s",
        notes,
        point.to_dict(),
        point.flags(plan.max_spread) if flags is None else flags,
    )


def _peer_rows(
    ws: Workspace,
    peer: PeerServer,
    key: str,
    batch: int,
    inputs: dict,
    baseline: Callable[[], LoadStats],
    points: dict[tuple[str, int], RepeatedPoint],
) -> list[Row]:
    """The peer at the same concurrencies: its served / in-process, and modelship gRPC / peer (each relative to
    the in-process figures measured beside it)."""
    plan = ws.plan
    rows = []
    for concurrency in [c for c in plan.concurrencies[key] if c in PEER_CONCURRENCIES]:
        ws.log(f"serving: {PEER} {key} batch {batch} concurrency {concurrency}")
        load = functools.partial(
            run_load,
            peer_sender(peer.port, inputs),
            concurrency=concurrency,
            batch=batch,
            duration_s=plan.point_window_s,
            max_requests=plan.max_requests,
            warmup=2,
            source=PEER,
        )
        case = f"{key} onnx b{batch} c{concurrency} {PEER} (http)"
        try:
            point = interleaved(load, baseline, plan.repetitions)
        except (RuntimeError, OSError) as exc:  # the peer failed: its row says why, the suite goes on
            rows.append(Row(SUITE, case, None, "served / in-process throughput", None, None, "inf/s",
                            f"the peer failed: {exc}; its log: {peer.last_error()}"))  # fmt: skip
            continue
        rows.append(_row(case, point, plan))
        ours = points.get(("grpc", concurrency))
        if ours is not None:
            rows.append(
                Row(
                    SUITE,
                    f"{key} onnx b{batch} c{concurrency} grpc vs {PEER}",
                    ours.ratio / point.ratio,
                    "modelship / peer (each served / in-process)",
                    ours.ratio,
                    point.ratio,
                    "ratio",
                    f"modelship {ours.describe()}; peer {point.describe()}",
                )
            )
    return rows


def _cross_check(ws: Workspace, server: TritonServer, model: str, measured: dict[tuple, LoadStats]) -> Row:
    """perf_analyzer and the Python load generator on the same point: both numbers and their ratio."""
    plan = ws.plan
    key = plan.main_model
    point = dict(PA_POINT, concurrency=max(c for c in plan.concurrencies[key] if c <= PA_POINT["concurrency"]))
    case = f"{key} onnx b{point['batch']} c{point['concurrency']} {point['protocol']}"
    ours = measured[key, point["batch"], point["concurrency"], point["protocol"]]
    try:
        analyzer = ensure_perf_analyzer()
        ws.log(f"serving: perf_analyzer {case}")
        theirs = analyzer.measure(
            model=model,
            url=server.grpc_url,
            protocol=point["protocol"],
            batch=point["batch"],
            concurrency=point["concurrency"],
            window_ms=plan.pa_window_ms,
        )
    except (PerfAnalyzerUnavailable, RuntimeError) as exc:
        return Row(SUITE, case, None, "perf_analyzer / loadgen throughput", None, ours.throughput, "inf/s", str(exc))
    return Row(
        SUITE,
        case,
        ratio(theirs.throughput, ours.throughput),
        "perf_analyzer / loadgen throughput",
        theirs.throughput,
        ours.throughput,
        "inf/s",
        "perf_analyzer " + latency_notes(theirs),
        {"perf_analyzer": theirs.to_dict(), "loadgen": ours.to_dict()},
    )
