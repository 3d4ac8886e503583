"""Latency and throughput statistics of one measured load (pure functions, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from modelship.contract.json_object import JsonObject

PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class LoadStats:
    """What one load run achieved. Latencies in milliseconds; throughput in inferences (samples) per second.

    `requests` and `elapsed_s` are None where the tool that measured does not report them (perf_analyzer).
    """

    batch: int
    concurrency: int
    throughput: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    source: str = "loadgen"
    requests: int | None = None
    elapsed_s: float | None = None

    def __post_init__(self) -> None:
        if self.batch < 1 or self.concurrency < 1:
            raise ValueError(f"batch and concurrency must be >= 1, got {self.batch}, {self.concurrency}")
        if self.throughput <= 0:
            raise ValueError(f"throughput must be > 0, got {self.throughput}")

    def to_dict(self) -> JsonObject:
        return asdict(self)


def summarize(
    latencies_s: Sequence[float], *, elapsed_s: float, batch: int, concurrency: int, source: str = "loadgen"
) -> LoadStats:
    """Summarise per-request latencies (seconds) measured over a window of `elapsed_s` seconds."""
    if len(latencies_s) == 0 or elapsed_s <= 0:
        raise ValueError(f"cannot summarise {len(latencies_s)} requests over {elapsed_s} s")
    ms = np.asarray(latencies_s, dtype=np.float64) * 1e3
    p50, p95, p99 = np.percentile(ms, PERCENTILES)
    return LoadStats(
        requests=len(ms),
        batch=batch,
        concurrency=concurrency,
        elapsed_s=elapsed_s,
        throughput=len(ms) * batch / elapsed_s,
        p50_ms=float(p50),
        p95_ms=float(p95),
        p99_ms=float(p99),
        mean_ms=float(ms.mean()),
        source=source,
    )


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either side is missing or the denominator is zero."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
