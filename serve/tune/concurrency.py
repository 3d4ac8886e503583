"""The client concurrency at which one candidate gives the most throughput within the p99 budget.

Throughput grows with concurrency until the server saturates, and p99 grows with it. So: measure at the start (1,
or where the config the search holds peaked: neighbouring configs saturate near it); halve while over the budget;
double (up to the most clients) while the budget holds and throughput still grows by GAIN; where the budget breaks,
bisect between the last concurrency that met it and the first that did not, to RESOLUTION. Started above 1 and
grown no further, the concurrency below the start is measured too, so a peak just under it (a batcher past its
best) is not missed. The point kept is the knee among the points meeting the constraints: the fewest clients within
GAIN of the most throughput. Pure: `climb` proposes each concurrency and is sent its point (serve.tune.search drives
it through the search that holds it); every verdict is `Constraints.judge`'s.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TypeVar

from modelship.contract.json_object import JsonObject
from modelship.serve.tune.constraints import Constraints
from modelship.serve.tune.measurement import Point, Probe
from modelship.serve.tune.space import Candidate

GAIN = 1.03  # doubling the clients must add this much throughput, or the server is saturated
RESOLUTION = 0.25  # bisection stops when the gap is at most this share of the concurrency that met the budget

T = TypeVar("T")
Steps = Generator[Probe, Point, T]  # proposes what to measure, is sent each point, returns what it found


@dataclass(frozen=True)
class Evaluation:
    """One candidate: every point measured (in order), the best meeting the constraints (None: none did), or why
    it could not be measured through (`skipped`: the server refused to load it, or a request failed)."""

    candidate: Candidate
    points: tuple[Point, ...] = ()
    best: Point | None = None
    skipped: str | None = None

    @property
    def throughput(self) -> float:
        return self.best.throughput if self.best is not None else 0.0

    def score(self, constraints: Constraints) -> tuple[int, float]:
        """Higher is better: meeting the constraints, by throughput; otherwise by how near its nearest point came
        to meeting them; a candidate the server could not serve last."""
        if self.skipped is not None:
            return (-1, 0.0)
        if self.best is not None:
            return (1, self.best.throughput)
        return (0, -min((constraints.judge(p).shortfall for p in self.points), default=float("inf")))

    def to_dict(self) -> JsonObject:
        return {
            "config": self.candidate.to_dict(),
            "best": self.best.to_dict() if self.best else None,
            "points": [p.to_dict() for p in self.points],
            "skipped": self.skipped,
        }


@dataclass
class Measured:
    """The points one candidate was measured at, in the order measured: each concurrency once."""

    candidate: Candidate
    points: dict[int, Point] = field(default_factory=dict)

    def at(self, concurrency: int) -> Steps[Point]:
        """The point at `concurrency`: proposed the first time, remembered after."""
        if concurrency not in self.points:
            self.points[concurrency] = yield Probe(self.candidate, concurrency)
        return self.points[concurrency]


def climb(measured: Measured, constraints: Constraints, max_concurrency: int, start: int = 1) -> Steps[Point | None]:
    """The concurrencies the module doc describes, from `start`, proposed for `measured`'s candidate; its knee
    (None: no point met the constraints)."""

    def within(concurrency: int) -> Steps[bool]:
        point = yield from measured.at(concurrency)
        return constraints.judge(point).latency

    met = max(1, min(start, max_concurrency))
    broke: int | None = None
    while met > 1 and not (yield from within(met)):
        broke, met = met, met // 2
    if not (yield from within(met)):
        return None
    if broke is None:
        first, rose = met, False
        while met < max_concurrency:
            up = min(met * 2, max_concurrency)
            if not (yield from within(up)):
                broke = up
                break
            grew = measured.points[up].throughput >= measured.points[met].throughput * GAIN
            met = up
            if not grew:
                break
            rose = True
        if first > 1 and not rose:
            yield from measured.at(first // 2)
    while broke is not None and broke - met > max(1, int(met * RESOLUTION)):
        middle = (met + broke) // 2
        if (yield from within(middle)):
            met = middle
        else:
            broke = middle
    return knee([p for p in measured.points.values() if constraints.judge(p).met])


def knee(met: list[Point]) -> Point | None:
    """The fewest clients whose throughput is within GAIN of the most: past the knee more clients only queue (the
    same throughput, a p99 closer to the budget), and which of two such points reads higher is noise."""
    if not met:
        return None
    most = max(p.throughput for p in met)
    return min((p for p in met if p.throughput * GAIN >= most), key=lambda p: p.concurrency)
