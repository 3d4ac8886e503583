"""The winner against the default, measured again: ROUNDS pairs, interleaved (default then winner), each at the
concurrency its search found. The winner holds only if its p99 meets the budget in every round and its median
throughput beats the default's; otherwise the default stays (pure: the measurer is injected)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from modelship.contract.json_object import JsonObject
from modelship.serve.tune.measurement import Budget, Point
from modelship.serve.tune.space import Candidate

ROUNDS = 3


@dataclass(frozen=True)
class Confirmation:
    rounds: tuple[tuple[Point, Point], ...]  # (default, winner) per round
    holds: bool
    ratio: float  # median of the winner's throughput over the default's, per round

    def to_dict(self) -> JsonObject:
        return {
            "holds": self.holds,
            "ratio": round(self.ratio, 3),
            "rounds": [{"default": d.to_dict(), "winner": w.to_dict()} for d, w in self.rounds],
        }


def confirm(
    measure: Callable[[Candidate, int], Point], default: Point, winner: Point, budget: Budget, rounds: int = ROUNDS
) -> Confirmation:
    """`default` and `winner` measured again, each at its concurrency, by `measure(candidate, concurrency)`."""

    def again(point: Point) -> Point:
        return measure(point.candidate, point.concurrency)

    pairs = tuple((again(default), again(winner)) for _ in range(rounds))
    ratio = statistics.median(w.throughput / d.throughput for d, w in pairs)
    default_within = all(d.within(budget) for d, _ in pairs)
    holds = all(w.within(budget) for _, w in pairs) and (ratio > 1.0 or not default_within)
    return Confirmation(pairs, holds, ratio)
