"""A point measured in interleaved pairs (served, in-process, served, in-process, ...), so that drift on the machine
hits both sides; the ratio reported is the median of the per-pair ratios, with its min and max.

How many pairs a point takes is decided by the point (`Repetition`): at least `min_pairs`, then one more pair at a
time until the median is known precisely enough (its relative standard error, estimated from the pairs' standard
deviation, at most `target`), at most `max_pairs`. A 20 ms inference settles in the minimum; a 1 ms one on
shared cores needs many more, and says so.

Two checks keep a fault from passing as a result: served faster than in-process on the same cores (ratio above
FAULT_RATIO) cannot be true, so it is reported as a measurement fault with its likely causes; a point whose median is
still less precise than its target after `max_pairs` is marked unstable.

A point may be spread over rounds (`Round`), each in fresh processes on both sides: a 1 ms model's speed is partly a
state of the process it runs in, fixed when the process starts (measured: one standalone process after another ran
the same file at 0.67-1.30x the worker), so pairs from one server process and one worker measure one draw of that
state however many there are. Round r of R takes the point to its share of the pairs, (r + 1) / R of `min_pairs`
and of `max_pairs`, and at least one pair.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from modelship.contract.json_object import JsonObject
from modelship.serve.load.stats import LoadStats

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


@dataclass(frozen=True)
class Round:
    """Round `index` (from 0) of `of`: the point's pairs due by the end of this round are `share` of them."""

    index: int = 0
    of: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.of:
            raise ValueError(f"need 0 <= index < of, got round {self.index} of {self.of}")

    @property
    def share(self) -> float:
        return (self.index + 1) / self.of


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
    """Each side's measurements, in the order they were taken (pairs: served[i] then baseline[i]), the repetition
    rule they were taken under and how many rounds (fresh processes) they came from."""

    served: list[LoadStats]
    baseline: list[LoadStats]
    repetition: Repetition
    rounds: int = 1

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
        where = f" in {self.rounds} rounds of fresh processes" if self.rounds > 1 else ""
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}, ±{self.error:.1%}"
        return f"median of {len(ratios)} interleaved pairs{where} ({spread})"

    def to_dict(self) -> JsonObject:
        return {
            "ratios": [round(r, 4) for r in self.ratios],
            "relative_error": round(self.error, 4),
            "rounds": self.rounds,
            "served": [s.to_dict() for s in self.served],
            "inprocess": [b.to_dict() for b in self.baseline],
        }


def interleaved(
    served: Callable[[], LoadStats],
    baseline: Callable[[], LoadStats],
    repetition: Repetition,
    *,
    earlier: RepeatedPoint | None = None,
    in_round: Round = Round(),
) -> RepeatedPoint:
    """Pairs, each the served side then the in-process side, as many as `repetition` asks for; in round r of R,
    after `earlier` (the same point's pairs from the rounds before), up to that round's share of them."""
    pairs = list(zip(earlier.served, earlier.baseline, strict=True)) if earlier is not None else []
    least = math.ceil(repetition.min_pairs * in_round.share)
    most = max(math.ceil(repetition.max_pairs * in_round.share), len(pairs) + 1)
    while True:
        pairs.append((served(), baseline()))
        ratios = [s.throughput / b.throughput for s, b in pairs]
        if len(pairs) >= most or (len(pairs) >= least and relative_error(ratios) <= repetition.target):
            break
    return RepeatedPoint([s for s, _ in pairs], [b for _, b in pairs], repetition, in_round.index + 1)


@dataclass
class PointsInRound:
    """One round of a model's points (`points`: every point so far, by name, shared by its rounds): `measure`
    continues the point of that name in this round."""

    in_round: Round
    points: dict[str, RepeatedPoint]

    def measure(
        self, name: str, served: Callable[[], LoadStats], baseline: Callable[[], LoadStats], repetition: Repetition
    ) -> RepeatedPoint:
        point = interleaved(served, baseline, repetition, earlier=self.points.get(name), in_round=self.in_round)
        self.points[name] = point
        return point
