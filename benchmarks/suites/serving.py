"""Serving efficiency (the headline): throughput through a local Triton over gRPC and binary HTTP, at batch 1 and 8
and several concurrencies, divided by in-process ONNX Runtime throughput on the same inputs with the same thread
count, measured in the same run. perf_analyzer measures one point as well, to show both load generators agree."""

from __future__ import annotations

from modelship.bench.measure import InProcess, latency_notes, served
from modelship.bench.perf_analyzer import PerfAnalyzerUnavailable, ensure_perf_analyzer
from modelship.bench.report import Row
from modelship.bench.stats import LoadStats, ratio
from modelship.bench.workspace import Workspace, sample_inputs
from modelship.serve.server import TritonServer

SUITE = "serving"
PA_POINT = {"batch": 8, "concurrency": 4, "protocol": "grpc"}


def run(ws: Workspace) -> list[Row]:
    plan = ws.plan
    repo = ws.repo(SUITE)
    names = {key: ws.publish(repo, key) for key in plan.serving_models}
    baselines: dict[tuple[str, int], tuple[dict, dict, LoadStats]] = {}
    for key in plan.serving_models:  # in-process first, while no server competes for the cores
        runner = InProcess(ws.export(key).artifact_path("onnx"))
        for batch in plan.batches:
            inputs = sample_inputs(ws.export(key), batch)
            ws.log(f"serving: in-process {key} batch {batch}")
            baselines[key, batch] = (inputs, runner.outputs(inputs), runner.measure(inputs, plan))
        del runner
    rows = []
    measured: dict[tuple, LoadStats] = {}
    with TritonServer(repo) as server:
        for (key, batch), (inputs, outputs, base) in baselines.items():
            for protocol in plan.protocols:
                for concurrency in plan.concurrencies[key]:
                    ws.log(f"serving: {key} batch {batch} concurrency {concurrency} {protocol}")
                    stats = served(server, protocol, names[key], inputs, outputs, plan, concurrency=concurrency)
                    measured[key, batch, concurrency, protocol] = stats
                    rows.append(
                        Row(
                            SUITE,
                            f"{key} onnx b{batch} c{concurrency} {protocol}",
                            ratio(stats.throughput, base.throughput),
                            "served / in-process throughput",
                            stats.throughput,
                            base.throughput,
                            "inf/s",
                            latency_notes(stats),
                            {"served": stats.to_dict(), "inprocess": base.to_dict(), "model": key},
                        )
                    )
        rows.append(_cross_check(ws, server, names[plan.main_model], measured))
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
