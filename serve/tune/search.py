"""The searches over serving configs, apart from what measures them and from what judges them (as Polygraphy's
markers and Triton Model Analyzer's generators are): a search proposes the next candidate and concurrency to
measure (`ask`) and is told the point it gave (`tell`); `drive` runs any search against a measurer;
`Constraints.judge` gives every verdict.

`HillClimb` starts at the config as published and moves to the best of its neighbours (serve.tune.space) while one
beats the current config by MIN_GAIN (a smaller step is noise), measuring each candidate once at the concurrencies
serve.tune.concurrency chooses, a neighbour's from the concurrency where the current config peaked. `BruteForce`
measures every candidate at every concurrency of the ladder within the budget: the reference the bench holds the
search to. Both are pure: the measurer is `drive`'s.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from modelship.serve.tune.concurrency import Evaluation, Measured, Steps, climb
from modelship.serve.tune.constraints import Constraints
from modelship.serve.tune.measurement import CandidateRefused, Measure, Point, Probe
from modelship.serve.tune.space import Candidate, Space

MIN_GAIN = 0.03  # a neighbour must beat the current config's throughput by this share to be moved to


@dataclass
class Search:
    """Every candidate evaluated, in order; the one it started from; the one it settled on (`chosen`: a neighbour
    replaces it only by a margin beyond noise); why it stopped early (None: it converged)."""

    constraints: Constraints
    start: Candidate
    evaluations: dict[Candidate, Evaluation] = field(default_factory=dict)
    chosen: Candidate | None = None
    stopped: str | None = None

    @property
    def measured(self) -> int:
        """Points measured (one candidate at one concurrency)."""
        return sum(len(e.points) for e in self.evaluations.values())

    @property
    def best(self) -> Evaluation:
        if self.chosen is not None:
            return self.evaluations[self.chosen]
        return max(self.evaluations.values(), key=lambda e: e.score(self.constraints))

    @property
    def latest(self) -> Evaluation:
        """The candidate evaluated last."""
        return next(reversed(self.evaluations.values()))

    @property
    def points(self) -> list[Point]:
        return [p for e in self.evaluations.values() for p in e.points]


Result = Point | CandidateRefused  # what measuring a probe gave: its point, or the server's refusal
Progress = Callable[[Search], None]
ShouldStop = Callable[[], str | None]


class Strategy(Protocol):
    """A search, ask/tell: `ask` proposes what to measure next (None: it is done, and asking again says so);
    `tell` gives it what that measurement gave, and returns the candidate's evaluation when that point completed
    one. `search` holds what it has evaluated and chosen so far."""

    search: Search

    def ask(self) -> Probe | None: ...

    def tell(self, result: Result) -> Evaluation | None: ...


def drive(
    strategy: Strategy,
    measure: Measure,
    *,
    should_stop: ShouldStop = lambda: None,
    progress: Progress = lambda search: None,
) -> Search:
    """Measure what `strategy` asks until it asks nothing more, or `should_stop` names a reason before the next
    candidate is started (one begun is measured through). A CandidateRefused is told as the result: the strategy
    skips that candidate. `progress` hears of each candidate evaluated."""
    search = strategy.search
    probe = strategy.ask()
    while probe is not None:
        result: Result
        try:
            result = measure(probe.candidate, probe.concurrency)
        except CandidateRefused as exc:
            result = exc
        evaluated = strategy.tell(result)
        probe = strategy.ask()
        if evaluated is None:
            continue
        progress(search)
        if probe is not None:
            search.stopped = should_stop()
            if search.stopped is not None:
                break
    return search


class Planned(ABC):
    """A strategy written as one generator (`plan`): it yields each probe where it needs the point, is sent the
    point there, and has the server's refusal raised there instead; `evaluate` turns the points one candidate was
    measured at into its evaluation."""

    def __init__(self, search: Search) -> None:
        """Starts the plan up to its first probe: a subclass sets what its plan reads before calling this."""
        self.search = search
        self._plan = self.plan()
        self._evaluated: Evaluation | None = None
        self._next = self._advance(None)

    @abstractmethod
    def plan(self) -> Steps[None]: ...

    def ask(self) -> Probe | None:
        return self._next

    def tell(self, result: Result) -> Evaluation | None:
        self._evaluated = None
        self._next = self._advance(result)
        return self._evaluated

    def _advance(self, result: Result | None) -> Probe | None:
        try:
            if result is None:
                return next(self._plan)
            if isinstance(result, CandidateRefused):
                return self._plan.throw(result)
            return self._plan.send(result)
        except StopIteration:
            return None

    def evaluate(self, candidate: Candidate, steps: Callable[[Measured], Steps[Point | None]]) -> Steps[Evaluation]:
        """`candidate` measured where `steps` proposes (they return its best point), recorded as evaluated; a
        refusal ends it as skipped, with the points measured before it."""
        measured = Measured(candidate)
        try:
            best = yield from steps(measured)
            evaluation = Evaluation(candidate, tuple(measured.points.values()), best)
        except CandidateRefused as exc:
            evaluation = Evaluation(candidate, tuple(measured.points.values()), skipped=exc.message)
        self.search.evaluations[candidate] = evaluation
        self._evaluated = evaluation
        return evaluation


class HillClimb(Planned):
    """Climb from `start` until no neighbour gains MIN_GAIN (`search.chosen`: the best so far, also when stopped
    early)."""

    def __init__(self, space: Space, start: Candidate, constraints: Constraints) -> None:
        self.space = space
        super().__init__(Search(constraints, start))

    def plan(self) -> Steps[None]:
        current = yield from self._visit(self.search.start, 1)
        while True:
            self.search.chosen = current.candidate
            best = current
            for neighbour in self.space.neighbours(current.candidate):
                tried = yield from self._visit(neighbour, current.best.concurrency if current.best else 1)
                if _beats(tried, best, self.search.constraints):
                    best = tried
                    self.search.chosen = best.candidate
            if best is current:
                return
            current = best

    def _visit(self, candidate: Candidate, start: int) -> Steps[Evaluation]:
        """`candidate`'s evaluation: measured from `start` clients the first time, remembered after."""
        if candidate in self.search.evaluations:
            return self.search.evaluations[candidate]
        constraints, most = self.search.constraints, self.space.max_concurrency
        return (yield from self.evaluate(candidate, lambda measured: climb(measured, constraints, most, start)))


def _beats(challenger: Evaluation, holder: Evaluation, constraints: Constraints) -> bool:
    mine, theirs = challenger.score(constraints), holder.score(constraints)
    if mine[0] != theirs[0]:
        return mine[0] > theirs[0]
    if mine[0] != 1:
        return mine[1] > theirs[1]
    return mine[1] > theirs[1] * (1 + MIN_GAIN)


class BruteForce(Planned):
    """Every candidate at every concurrency of the ladder up to its first point over the p99 budget (in a closed
    loop more clients only queue longer, so no point above it can be within the budget); each one's best: the most
    throughput meeting the constraints."""

    def __init__(self, space: Space, constraints: Constraints) -> None:
        self.space = space
        super().__init__(Search(constraints, next(space.candidates())))

    def plan(self) -> Steps[None]:
        for candidate in self.space.candidates():
            yield from self.evaluate(candidate, self._ladder)

    def _ladder(self, measured: Measured) -> Steps[Point | None]:
        judge = self.search.constraints.judge
        for concurrency in self.space.concurrencies():
            point = yield from measured.at(concurrency)
            if not judge(point).latency:
                break
        return max((p for p in measured.points.values() if judge(p).met), key=lambda p: p.throughput, default=None)
