"""Opt-in tuning experiments (`modelship bench --suite tuning`), the figures behind benchmarks/README.md's
"Tuning tried": ONNX Runtime intra-op threads and graph optimisation level (in-process), Triton instance count
(main model, batch 8, concurrency 4), dynamic-batching queue delay (small model, batch 1, concurrency 8), and
request encoding (binary vs JSON tensors over HTTP)."""

from __future__ import annotations

from modelship.bench.loadgen import run_load
from modelship.bench.measure import latency_notes, reference_outputs, served
from modelship.bench.report import Row
from modelship.bench.stats import LoadStats, ratio
from modelship.bench.tuning import clone_model, tune_model
from modelship.bench.workspace import Workspace, sample_inputs
from modelship.serve.server import TritonServer

SUITE = "tuning"
ORT_VARIANTS = {  # name -> (intra-op threads, optimisation level name); the first is the baseline (production)
    "2 threads, ENABLE_ALL": (2, "ORT_ENABLE_ALL"),
    "1 thread, ENABLE_ALL": (1, "ORT_ENABLE_ALL"),
    "2 threads, ENABLE_EXTENDED": (2, "ORT_ENABLE_EXTENDED"),
    "2 threads, ENABLE_BASIC": (2, "ORT_ENABLE_BASIC"),
}
QUEUE_DELAYS_US = (100, 0, 1000, 5000)  # the first is the publisher's default
INSTANCES = (1, 2)


def _row(case: str, stats: LoadStats, base: LoadStats, of: str, data: dict | None = None) -> Row:
    return Row(SUITE, case, ratio(stats.throughput, base.throughput), of, stats.throughput, base.throughput,
               "inf/s", latency_notes(stats), data or {})  # fmt: skip


def _ort_variants(ws: Workspace, key: str, batch: int) -> list[Row]:
    import onnxruntime as ort

    from modelship.parity import make_session

    export = ws.export(key)
    inputs = sample_inputs(export, batch)
    results = {}
    for label, (threads, level) in ORT_VARIANTS.items():
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        session = make_session(export.artifact_path("onnx"), session_options=options)
        ws.log(f"tuning: in-process {key} b{batch} {label}")
        results[label] = run_load(
            lambda s=session: lambda: s.run(None, inputs), batch=batch, duration_s=ws.plan.window_s,
            max_requests=ws.plan.max_requests, source="onnxruntime",
        )  # fmt: skip
    base = next(iter(results.values()))
    of = f"variant / {next(iter(ORT_VARIANTS))} throughput"
    return [_row(f"in-process {key} b{batch} {label}", s, base, of) for label, s in results.items()]


def run(ws: Workspace) -> list[Row]:
    plan = ws.plan
    main, small = plan.main_model, plan.small_model
    rows = _ort_variants(ws, main, 8)
    repo = ws.repo(SUITE)
    main_name = ws.publish(repo, main)
    small_name = ws.publish(repo, small)
    instances = {1: main_name}
    for count in INSTANCES[1:]:
        instances[count] = clone_model(repo, main_name, f"{main_name}_x{count}").name
        tune_model(repo / instances[count], instances=count)
    delays = {QUEUE_DELAYS_US[0]: small_name}
    for delay in QUEUE_DELAYS_US[1:]:
        delays[delay] = clone_model(repo, small_name, f"{small_name}_q{delay}").name
        tune_model(repo / delays[delay], queue_delay_us=delay)
    main_in = sample_inputs(ws.export(main), 8)
    main_out = reference_outputs(ws.export(main).artifact_path("onnx"), main_in)
    small_in = sample_inputs(ws.export(small), 1)
    small_out = reference_outputs(ws.export(small).artifact_path("onnx"), small_in)
    with TritonServer(repo) as server:
        stats = {}
        for count, name in instances.items():
            ws.log(f"tuning: {main} {count} instance(s)")
            stats[count] = served(server, "grpc", name, main_in, main_out, plan, concurrency=4)
        rows += [
            _row(f"{main} b8 c4 grpc, {count} instance(s)", s, stats[1], "variant / 1 instance throughput")
            for count, s in stats.items()
        ]
        stats = {}
        for delay, name in delays.items():
            ws.log(f"tuning: {small} queue delay {delay} us")
            stats[delay] = served(server, "grpc", name, small_in, small_out, plan, concurrency=8)
        of = f"variant / {QUEUE_DELAYS_US[0]} µs delay throughput"
        rows += [_row(f"{small} b1 c8 grpc, queue delay {d} µs", s, stats[QUEUE_DELAYS_US[0]], of)
                 for d, s in stats.items()]  # fmt: skip
        small8_in = sample_inputs(ws.export(small), 8)
        small8_out = reference_outputs(ws.export(small).artifact_path("onnx"), small8_in)
        stats = {}
        for protocol in ("http", "http-json"):
            ws.log(f"tuning: {small} b8 {protocol}")
            stats[protocol] = served(server, protocol, small_name, small8_in, small8_out, plan)
        rows += [_row(f"{small} b8 c1 {p}", s, stats["http"], "variant / binary HTTP throughput")
                 for p, s in stats.items()]  # fmt: skip
    return rows
