"""What a search asks to measure (a candidate at a client concurrency), what one measurement gave, and the shape of
a measurer (the live one drives Triton; tests answer from a known surface). Points are judged in
serve.tune.constraints."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from modelship.contract.errors import TuneError
from modelship.contract.json_object import JsonObject
from modelship.serve.load.stats import LoadStats
from modelship.serve.tune.space import Candidate

AGREE = 0.10  # windows agree when each one's throughput is within this share of their median
WINDOWS = 3  # agreeing windows a point needs
MOST_WINDOWS = 8  # windows a point may take to agree; past it the point is marked unstable


class CandidateRefused(TuneError):
    """The server would not serve a candidate config (it keeps serving the one it had): that candidate is skipped."""


@dataclass(frozen=True)
class Probe:
    """What a search asks to measure next: `candidate` served, at `concurrency` clients."""

    candidate: Candidate
    concurrency: int


@dataclass(frozen=True)
class Point:
    """`candidate` measured at `concurrency` clients: the median of its agreeing windows, and the share of one core
    the measuring client used meanwhile (a client near 1.0 per thread starves the server it measures)."""

    candidate: Candidate
    concurrency: int
    throughput: float
    p50_ms: float
    p99_ms: float
    client_cpu: float = 0.0
    windows: int = WINDOWS
    stable: bool = True

    def to_dict(self) -> JsonObject:
        return {
            "config": self.candidate.to_dict(),
            "concurrency": self.concurrency,
            "throughput": round(self.throughput, 2),
            "p50_ms": round(self.p50_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
            "client_cpu": round(self.client_cpu, 2),
            "windows": self.windows,
            "stable": self.stable,
        }


Measure = Callable[[Candidate, int], Point]  # one candidate at one concurrency; CandidateRefused: it cannot serve


def agreeing(windows: Sequence[LoadStats], agree: float = AGREE, need: int = WINDOWS) -> bool:
    """Whether the last `need` windows' throughputs all lie within `agree` of their median."""
    if len(windows) < need:
        return False
    last = [w.throughput for w in windows[-need:]]
    middle = statistics.median(last)
    return all(abs(value - middle) <= agree * middle for value in last)


def until_agreeing(run_window: Callable[[], LoadStats], most: int = MOST_WINDOWS) -> tuple[list[LoadStats], bool]:
    """Windows run back to back until the last WINDOWS agree (or `most` have run): all of them, and whether the
    last ones agreed."""
    windows: list[LoadStats] = []
    while len(windows) < most:
        windows.append(run_window())
        if agreeing(windows):
            return windows, True
    return windows, False


def point_of(candidate: Candidate, windows: Sequence[LoadStats], stable: bool, client_cpu: float) -> Point:
    """The point the last WINDOWS windows make: the median of each figure."""
    last = windows[-WINDOWS:]
    return Point(
        candidate,
        last[0].concurrency,
        statistics.median(w.throughput for w in last),
        statistics.median(w.p50_ms for w in last),
        statistics.median(w.p99_ms for w in last),
        client_cpu,
        len(windows),
        stable,
    )
