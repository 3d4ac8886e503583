"""Transport: one 8x3x224x224 fp32 request (4.8 MB) over gRPC, binary HTTP and system shared memory (inputs and
outputs in /dev/shm regions registered with the server), at concurrency 1, each compared with in-process ONNX
Runtime on the same inputs. The small model keeps compute low so that the cost of moving the tensor shows."""

from __future__ import annotations

from modelship.bench.measure import InProcess, latency_notes, served
from modelship.bench.report import Row
from modelship.bench.stats import ratio
from modelship.bench.workspace import Workspace, sample_inputs
from modelship.serve.server import TritonServer

SUITE = "transport"
PROTOCOLS = ("grpc", "http", "grpc-shm", "http-shm")


def run(ws: Workspace) -> list[Row]:
    plan = ws.plan
    key = plan.small_model
    export = ws.export(key)
    repo = ws.repo(SUITE)
    name = ws.publish(repo, key)
    inputs = sample_inputs(export, plan.transport_batch)
    ws.log(f"transport: in-process {key} batch {plan.transport_batch}")
    with InProcess(export.artifact_path("onnx")) as runner:
        outputs = runner.outputs(inputs)
        base = runner.measure(inputs, plan)
    size_mb = sum(a.nbytes for a in inputs.values()) / 1e6
    rows = []
    with TritonServer(repo) as server:
        for protocol in PROTOCOLS:
            ws.log(f"transport: {protocol}")
            stats = served(server, protocol, name, inputs, outputs, plan)
            rows.append(
                Row(
                    SUITE,
                    f"{key} b{plan.transport_batch} ({size_mb:.1f} MB) c1 {protocol}",
                    ratio(stats.throughput, base.throughput),
                    "served / in-process throughput",
                    stats.throughput,
                    base.throughput,
                    "inf/s",
                    f"{latency_notes(stats)}; +{stats.mean_ms - base.mean_ms:.1f} ms/request",
                    {"served": stats.to_dict(), "inprocess": base.to_dict(), "request_mb": size_mb},
                )
            )
    return rows
