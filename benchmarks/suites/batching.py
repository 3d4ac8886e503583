"""Dynamic batching gain: single-image requests at concurrency 8 against the same model published twice, with
Triton's dynamic batcher (the publisher's default) and without it. Triton's metrics give the average batch the
batcher formed (inferences / executions)."""

from __future__ import annotations

import re
import urllib.request

from modelship.bench.measure import latency_notes, reference_outputs, served
from modelship.bench.report import Row
from modelship.bench.stats import ratio
from modelship.bench.tuning import clone_model, tune_model
from modelship.bench.workspace import Workspace, sample_inputs
from modelship.serve.server import TritonServer

SUITE = "batching"
_METRIC = re.compile(r'^(nv_inference_count|nv_inference_exec_count)\{model="([^"]+)",version="[^"]*"\} (\S+)$')


def scrape_counts(text: str) -> dict[str, dict[str, float]]:
    """{model: {"nv_inference_count": n, "nv_inference_exec_count": m}} from Triton's Prometheus text."""
    counts: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = _METRIC.match(line.strip())
        if match:
            metric, model, value = match.groups()
            counts.setdefault(model, {})[metric] = counts.get(model, {}).get(metric, 0.0) + float(value)
    return counts


def _counts(server: TritonServer) -> dict[str, dict[str, float]]:
    with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
        return scrape_counts(response.read().decode())


def run(ws: Workspace) -> list[Row]:
    plan = ws.plan
    repo = ws.repo(SUITE)
    rows = []
    models = {}
    for key in plan.serving_models:
        name = ws.publish(repo, key)
        off = f"{name}_nobatch"
        tune_model(clone_model(repo, name, off), dynamic_batching=False)
        export = ws.export(key)
        inputs = sample_inputs(export, 1)
        models[key] = (name, off, inputs, reference_outputs(export.artifact_path("onnx"), inputs))
    concurrency = plan.batching_concurrency
    with TritonServer(repo) as server:
        for key, (on, off, inputs, outputs) in models.items():
            stats = {}
            average = {}
            for name in (on, off):
                ws.log(f"batching: {name} batch 1 concurrency {concurrency}")
                before = _counts(server).get(name, {})
                stats[name] = served(server, "grpc", name, inputs, outputs, plan, concurrency=concurrency)
                after = _counts(server).get(name, {})
                executions = after.get("nv_inference_exec_count", 0) - before.get("nv_inference_exec_count", 0)
                inferences = after.get("nv_inference_count", 0) - before.get("nv_inference_count", 0)
                average[name] = ratio(inferences, executions)
            rows.append(
                Row(
                    SUITE,
                    f"{key} onnx b1 c{concurrency} grpc",
                    ratio(stats[on].throughput, stats[off].throughput),
                    "dynamic batching on / off throughput",
                    stats[on].throughput,
                    stats[off].throughput,
                    "inf/s",
                    f"avg batch formed {average[on] or 0:.1f}; on {latency_notes(stats[on])}; "
                    f"off p50 {stats[off].p50_ms:.1f} ms",
                    {"on": stats[on].to_dict(), "off": stats[off].to_dict(), "average_batch": average},
                )
            )
    return rows
