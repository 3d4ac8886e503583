"""A point measured in interleaved pairs (served, in-process, served, in-process, ...), so that drift on the machine
hits both sides; the ratio reported is the median of the per-pair ratios, with its min and max.

How many pairs a point takes is decided by the point (`Repetition`): at least `min_pairs`, then one more pair at a
time until the median is known precisely enough (its relative standard error, estimated from the pairs' standard
deviation, at most `target`), at most `max_pairs`. A 20 ms inference settles in the minimum; a 1 ms one on
shared cores needs many more, and says so.

Two checks keep a fault from passing as a result: served faster than in-process on the same cores (ratio above
FAULT_RATIO) cannot be true, so it is reported as a measurement fault with its likely causes; a point whose median is
still less precise than its target after `max_pairs` is marked unstable.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from modelship.bench.stats import LoadStats

FAULT_RATIO = 1.05
FAULT_CAUSES = (
    "the baseline is handicapped (it ran in a process that had run torch, or beside another load) or the two sides "
    "ran different inputs or settings"
)
# standard error of a sample median = sqrt(pi / 2) * sigma / sqrt(n) for normal noise
_MEDIAN_SE = math.sqrt(math.pi / 2)


@dataclass(frozen=True)
class Repetition:
    """How many interleaved pairs a point takes: `min_pairs`, then more until the median's relative standard error
    is at most `target`, never more than `max_pairs`."""

    min_pairs: int = 6
    max_pairs: int = 16
    target: float = 0.025

    def __post_init__(self) -> None:
        if not 1 <= self.min_pairs <= self.max_pairs:
            raise ValueError(f"need 1 <= min_pairs <= max_pairs, got {self.min_pairs}, {self.max_pairs}")
        if not 0 < self.target < 1:
            raise ValueError(f"target must be a fraction in (0, 1), got {self.target}")


def relative_error(ratios: list[float]) -> float:
    """The median's relative standard error, estimated from the ratios' standard deviation (inf for one ratio).
    Not from their median absolute deviation: with few pairs that is often near zero by chance (two equal ratios),
    which stopped points early (measured: a point stopped at 5 pairs claiming ±1.6% read 7% apart in the next
    run)."""
    if len(ratios) < 2:
        return math.inf
    return _MEDIAN_SE * statistics.stdev(ratios) / math.sqrt(len(ratios)) / statistics.median(ratios)


@dataclass(frozen=True)
class RepeatedPoint:
    """Each side's measurements, in the order they were taken (pairs: served[i] then baseline[i]), and the
    repetition rule they were taken under."""

    served: list[LoadStats]
    baseline: list[LoadStats]
    repetition: Repetition

    @property
    def ratios(self) -> list[float]:
        return [s.throughput / b.throughput for s, b in zip(self.served, self.baseline, strict=True)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def error(self) -> float:
        """The median's relative standard error (`relative_error`)."""
        return relative_error(self.ratios)

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

    def flags(self) -> list[str]:
        """A served / in-process point's flags: a measurement fault (above FAULT_RATIO), then `unstable`."""
        found = []
        if self.ratio > FAULT_RATIO:
            found.append(
                f"measurement fault: served faster than in-process on the same cores ({self.ratio:.2f} > "
                f"{FAULT_RATIO}); likely cause: {FAULT_CAUSES}"
            )
        return found + self.unstable()

    def unstable(self) -> list[str]:
        """The `unstable` flag when the median is less precise than the target after every pair allowed."""
        if self.error > self.repetition.target:
            return [
                f"unstable: after {len(self.served)} pairs the median is known to ±{self.error:.2%} "
                f"(target ±{self.repetition.target:.1%})"
            ]
        return []

    def describe(self) -> str:
        ratios = self.ratios
        return f"median of {len(ratios)} interleaved pairs ({min(ratios):.2f}-{max(ratios):.2f}, ±{self.error:.1%})"

    def to_dict(self) -> dict[str, object]:
        return {
            "ratios": [round(r, 4) for r in self.ratios],
            "relative_error": round(self.error, 4),
            "served": [s.to_dict() for s in self.served],
            "inprocess": [b.to_dict() for b in self.baseline],
        }


def interleaved(
    served: Callable[[], LoadStats], baseline: Callable[[], LoadStats], repetition: Repetition
) -> RepeatedPoint:
    """Pairs, each the served side then the in-process side, as many as `repetition` asks for."""
    pairs: list[tuple[LoadStats, LoadStats]] = []
    while len(pairs) < repetition.max_pairs:
        pairs.append((served(), baseline()))
        ratios = [s.throughput / b.throughput for s, b in pairs]
        if len(pairs) >= repetition.min_pairs and relative_error(ratios) <= repetition.target:
            break
    return RepeatedPoint([s for s, _ in pairs], [b for _, b in pairs], repetition)
