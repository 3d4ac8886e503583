"""The client concurrency at which one candidate gives the most throughput within the p99 budget.

Throughput grows with concurrency until the server saturates, and p99 grows with it. So: measure at the start (1,
or where the config the search holds peaked: neighbouring configs saturate near it); halve while over the budget;
double (up to the most clients) while the budget holds and throughput still grows by GAIN; where the budget breaks,
bisect between the last concurrency that met it and the first that did not, to RESOLUTION. Started above 1 and
grown no further, the concurrency below the start is measured too, so a peak just under it (a batcher past its
best) is not missed. The point kept is the knee: the fewest clients within GAIN of the most throughput measured.
Pure: the measurer is injected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from modelship.contract.json_object import JsonObject
from modelship.serve.tune.measurement import Budget, Point
from modelship.serve.tune.space import Candidate

GAIN = 1.03  # doubling the clients must add this much throughput, or the server is saturated
RESOLUTION = 0.25  # bisection stops when the gap is at most this share of the concurrency that met the budget


@dataclass(frozen=True)
class Evaluation:
    """One candidate: every point measured (in order), the best within budget (None: none was), or why it could not
    be measured at all (`skipped`: the server refused to load it)."""

    candidate: Candidate
    points: tuple[Point, ...] = ()
    best: Point | None = None
    skipped: str | None = None

    @property
    def throughput(self) -> float:
        return self.best.throughput if self.best is not None else 0.0

    def score(self, budget: Budget) -> tuple[int, float]:
        """Higher is better: within budget by throughput; otherwise by how close its lowest p99 came."""
        if self.best is not None and self.best.throughput >= budget.min_throughput:
            return (1, self.best.throughput)
        lowest = min((p.p99_ms for p in self.points), default=float("inf"))
        return (0, -lowest)

    def to_dict(self) -> JsonObject:
        return {
            "config": self.candidate.to_dict(),
            "best": self.best.to_dict() if self.best else None,
            "points": [p.to_dict() for p in self.points],
            "skipped": self.skipped,
        }


def evaluate(
    candidate: Candidate,
    measure: Callable[[Candidate, int], Point],
    budget: Budget,
    max_concurrency: int,
    start: int = 1,
) -> Evaluation:
    """`candidate` measured at the concurrencies the module doc describes, from `start`."""
    measured: dict[int, Point] = {}

    def at(concurrency: int) -> Point:
        if concurrency not in measured:
            measured[concurrency] = measure(candidate, concurrency)
        return measured[concurrency]

    met = max(1, min(start, max_concurrency))
    broke: int | None = None
    while met > 1 and not at(met).within(budget):
        broke, met = met, met // 2
    if not at(met).within(budget):
        return Evaluation(candidate, tuple(measured.values()))
    if broke is None:
        first, rose = met, False
        while met < max_concurrency:
            up = min(met * 2, max_concurrency)
            point = at(up)
            if not point.within(budget):
                broke = up
                break
            grew = point.throughput >= at(met).throughput * GAIN
            met = up
            if not grew:
                break
            rose = True
        if first > 1 and not rose:
            at(first // 2)
    while broke is not None and broke - met > max(1, int(met * RESOLUTION)):
        middle = (met + broke) // 2
        if at(middle).within(budget):
            met = middle
        else:
            broke = middle
    return Evaluation(candidate, tuple(measured.values()), knee([p for p in measured.values() if p.within(budget)]))


def knee(within: list[Point]) -> Point | None:
    """The fewest clients whose throughput is within GAIN of the most: past the knee more clients only queue (the
    same throughput, a p99 closer to the budget), and which of two such points reads higher is noise."""
    if not within:
        return None
    most = max(p.throughput for p in within)
    return min((p for p in within if p.throughput * GAIN >= most), key=lambda p: p.concurrency)
