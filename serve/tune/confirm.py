"""The winner against the default, measured again: ROUNDS pairs, interleaved (default then winner), each at the
concurrency its search found. The winner holds only if it meets the constraints in every round and its median
throughput beats the default's (or the default met them in no round); otherwise the default stays (pure: the
measurer is injected)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from modelship.contract.json_object import JsonObject
from modelship.serve.tune.constraints import Constraints
from modelship.serve.tune.measurement import Measure, Point

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
    measure: Measure, default: Point, winner: Point, constraints: Constraints, rounds: int = ROUNDS
) -> Confirmation:
    """`default` and `winner` measured again, each at its concurrency, by `measure(candidate, concurrency)`."""

    def again(point: Point) -> Point:
        return measure(point.candidate, point.concurrency)

    pairs = tuple((again(default), again(winner)) for _ in range(rounds))
    ratio = statistics.median(w.throughput / d.throughput for d, w in pairs)
    default_met = all(constraints.judge(d).met for d, _ in pairs)
    holds = all(constraints.judge(w).met for _, w in pairs) and (ratio > 1.0 or not default_met)
    return Confirmation(pairs, holds, ratio)
