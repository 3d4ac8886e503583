"""What a config must meet, and the one place a point is judged against it: a p99 latency budget and a throughput
floor, together. Everything in tune that asks whether a point is good enough asks `Constraints.judge`: the
concurrency search (steering by the latency verdict), the best point of each candidate, the order of candidates
that meet nothing, the confirmation of the winner and the refusal when no config meets both. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modelship.contract.errors import TuneError, UsageError
from modelship.serve.tune.measurement import Point


@dataclass(frozen=True)
class Verdict:
    """One point judged: whether its p99 is within the budget and its throughput at the floor or above, and how far
    it falls short of both (the shares of the budget it overshoots and of the floor it misses, summed; 0 when met)."""

    latency: bool
    throughput: bool
    shortfall: float

    @property
    def met(self) -> bool:
        return self.latency and self.throughput


@dataclass(frozen=True)
class Constraints:
    """What a config must meet: p99 latency (ms) and a throughput floor (inferences/s; 0: none)."""

    p99_ms: float
    min_throughput: float = 0.0

    def __post_init__(self) -> None:
        if not self.p99_ms > 0:
            raise UsageError(f"the p99 budget must be > 0 ms, got {self.p99_ms}", hint="e.g. --p99-ms 200")
        if not self.min_throughput >= 0:
            raise UsageError(f"the throughput floor must be >= 0/s, got {self.min_throughput}",
                             hint="e.g. --min-throughput 100")  # fmt: skip

    def judge(self, point: Point) -> Verdict:
        over = max(0.0, point.p99_ms / self.p99_ms - 1)
        under = max(0.0, 1 - point.throughput / self.min_throughput) if self.min_throughput else 0.0
        return Verdict(point.p99_ms <= self.p99_ms, point.throughput >= self.min_throughput, over + under)

    def describe(self) -> str:
        return f"p99 {self.p99_ms:g} ms" + (f" at {self.min_throughput:g}/s" if self.min_throughput else "")

    def closest(self, points: Sequence[Point]) -> dict[str, Point]:
        """For each constraint (the floor only when there is one), the point that came nearest to meeting it: the
        lowest p99, the most throughput."""
        if not points:
            return {}
        nearest = {"p99": min(points, key=lambda p: p.p99_ms)}
        if self.min_throughput:
            nearest["throughput"] = max(points, key=lambda p: p.throughput)
        return nearest

    def unmet(self, model: str, points: Sequence[Point], report: str) -> TuneError:
        """The refusal when no config of `model` meets both: one line naming the closest point on each constraint
        (`report`: where every point measured was written)."""
        nearest = self.closest(points)
        said = "; ".join(f"the closest on {name}: {_said(point)}" for name, point in nearest.items())
        fixes = "raise --p99-ms" + (" or lower --min-throughput" if self.min_throughput else "")
        return TuneError(
            f"no config of {model} meets {self.describe()}" + (f"; {said}" if said else "; no point was measured"),
            hint=f"{fixes}; every point is in {report}",
            details={"closest": {name: point.to_dict() for name, point in nearest.items()}, "report": report},
        )


def _said(point: Point) -> str:
    return (
        f"{point.candidate.describe()} at {point.concurrency} clients, p99 {point.p99_ms:.1f} ms, "
        f"{point.throughput:.1f}/s"
    )
