"""Transport: one 8x3x224x224 fp32 request (4.8 MB) over gRPC, binary HTTP and system shared memory (inputs and
outputs in /dev/shm regions registered with the server), the protocols `BenchPlan.transport_protocols` names, at
concurrency 1, each against in-process ONNX Runtime on the same inputs in interleaved pairs (repeated.interleaved),
so that drift on the machine hits both sides. The small model keeps compute low so that the cost of moving the
tensor shows."""

from __future__ import annotations

import functools
from dataclasses import replace

from modelship.bench.measure import InProcess, served
from modelship.bench.repeated import interleaved
from modelship.bench.report import Row
from modelship.bench.suites.serving import point_row
from modelship.bench.workspace import Workspace, sample_inputs
from modelship.serve.server import TritonServer

SUITE = "transport"


def run(ws: Workspace) -> list[Row]:
    plan = ws.plan
    point_plan = replace(plan, window_s=plan.point_window_s)
    key = plan.small_model
    export = ws.export(key)
    repo = ws.repo(SUITE)
    name = ws.publish(repo, key)
    inputs = sample_inputs(export, plan.transport_batch)
    size_mb = sum(a.nbytes for a in inputs.values()) / 1e6
    rows = []
    with TritonServer(repo) as server, InProcess(export.artifact_path("onnx")) as runner:
        outputs = runner.outputs(inputs)
        baseline = functools.partial(runner.measure, inputs, point_plan)
        for protocol in plan.transport_protocols:
            ws.log(f"transport: {protocol} vs in-process, {key} batch {plan.transport_batch}")
            send = functools.partial(served, server, protocol, name, inputs, outputs, point_plan)
            point = interleaved(send, baseline, plan.repetition)
            row = point_row(f"{key} b{plan.transport_batch} ({size_mb:.1f} MB) c1 {protocol}", point, plan, suite=SUITE)
            added = point.median_served.mean_ms - plan.transport_batch * 1e3 / point.baseline_throughput
            row.notes += f"; +{added:.1f} ms/request"
            row.data["request_mb"] = size_mb
            rows.append(row)
    return rows
