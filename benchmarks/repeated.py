"""A point measured several times, alternating the two sides (served, in-process, served, in-process, ...), so that
drift on the machine hits both; the ratio reported is the median of the per-pair ratios, with its min and max.

Two checks keep a fault from passing as a result: served faster than in-process on the same cores (ratio above
FAULT_RATIO) cannot be true, so it is reported as a measurement fault with its likely causes; a spread wider than
the plan's bound marks the point unstable.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from modelship.bench.stats import LoadStats

FAULT_RATIO = 1.05
FAULT_CAUSES = (
    "the baseline is handicapped (it ran in a process that had run torch, or beside another load) or the two sides "
    "ran different inputs or settings"
)


@dataclass(frozen=True)
class RepeatedPoint:
    """Each side's measurements, in the order they were taken (pairs: served[i] then baseline[i])."""

    served: list[LoadStats]
    baseline: list[LoadStats]

    @property
    def ratios(self) -> list[float]:
        return [s.throughput / b.throughput for s, b in zip(self.served, self.baseline, strict=True)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def spread(self) -> float:
        """(max - min) / median of the per-pair ratios."""
        return (max(self.ratios) - min(self.ratios)) / self.ratio

    @property
    def median_served(self) -> LoadStats:
        """The served measurement of median throughput (the one its latencies are quoted from)."""
        return sorted(self.served, key=lambda s: s.throughput)[(len(self.served) - 1) // 2]

    @property
    def served_throughput(self) -> float:
        return statistics.median(s.throughput for s in self.served)

    @property
    def baseline_throughput(self) -> float:
        return statistics.median(b.throughput for b in self.baseline)

    def flags(self, max_spread: float) -> list[str]:
        """A served / in-process point's flags: a measurement fault (above FAULT_RATIO), then `unstable`."""
        found = []
        if self.ratio > FAULT_RATIO:
            found.append(
                f"measurement fault: served faster than in-process on the same cores ({self.ratio:.2f} > "
                f"{FAULT_RATIO}); likely cause: {FAULT_CAUSES}"
            )
        return found + self.unstable(max_spread)

    def unstable(self, max_spread: float) -> list[str]:
        """The `unstable` flag when the pair ratios spread wider than `max_spread`, else nothing."""
        if self.spread > max_spread:
            return [f"unstable: the ratios spread {self.spread:.0%} (> {max_spread:.0%})"]
        return []

    def describe(self) -> str:
        ratios = self.ratios
        return f"median of {len(ratios)} interleaved pairs ({min(ratios):.2f}-{max(ratios):.2f})"

    def to_dict(self) -> dict[str, object]:
        return {
            "ratios": [round(r, 4) for r in self.ratios],
            "spread": round(self.spread, 4),
            "served": [s.to_dict() for s in self.served],
            "inprocess": [b.to_dict() for b in self.baseline],
        }


def interleaved(served: Callable[[], LoadStats], baseline: Callable[[], LoadStats], repetitions: int) -> RepeatedPoint:
    """`repetitions` pairs, each the served side then the in-process side."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    pairs = [(served(), baseline()) for _ in range(repetitions)]
    return RepeatedPoint([s for s, _ in pairs], [b for _, b in pairs])
