"""The two sides of every serving comparison: in-process ONNX Runtime and the same inputs through Triton."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from modelship.bench.loadgen import run_load
from modelship.bench.requests import sender
from modelship.bench.stats import LoadStats
from modelship.bench.workspace import Plan


class InProcess:
    """One ONNX Runtime session made by `export.parity.make_session`: the same graph optimisation level and
    intra-op thread count (= cores) as the server's onnxruntime backend with one instance."""

    def __init__(self, path: Path) -> None:
        from modelship.export.parity import make_session

        self.session = make_session(path)
        self.output_names = [o.name for o in self.session.get_outputs()]

    def outputs(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.output_names, self.session.run(None, inputs), strict=True))

    def measure(self, inputs: dict[str, np.ndarray], plan: Plan, *, concurrency: int = 1) -> LoadStats:
        batch = len(next(iter(inputs.values())))
        return run_load(
            lambda: lambda: self.session.run(None, inputs),
            concurrency=concurrency,
            batch=batch,
            duration_s=plan.window_s,
            max_requests=plan.max_requests,
            source="onnxruntime",
        )


def served(
    server: Any,
    protocol: str,
    model: str,
    inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
    plan: Plan,
    *,
    concurrency: int = 1,
) -> LoadStats:
    """Throughput and latency of `model` on `server` (a running serve.server.TritonServer) with the loadgen."""
    grpc = protocol.startswith("grpc")
    url, headers = (server.grpc_url, server.grpc_admin_headers) if grpc else (server.http_url, server.admin_headers)
    return run_load(
        sender(url, protocol, model, inputs, outputs, headers),
        concurrency=concurrency,
        batch=len(next(iter(inputs.values()))),
        duration_s=plan.window_s,
        max_requests=plan.max_requests,
        warmup=2,
    )


def latency_notes(stats: LoadStats) -> str:
    return f"p50/95/99 {stats.p50_ms:.1f}/{stats.p95_ms:.1f}/{stats.p99_ms:.1f} ms"
