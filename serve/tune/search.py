"""The search over serving configs, apart from what measures them (Polygraphy's markers apart from the judge).

`hill_climb` starts at the config as published and moves to the best of its neighbours (serve.tune.space) while one
beats the current config by MIN_GAIN (a smaller step is noise), measuring each candidate once at the concurrencies
serve.tune.concurrency chooses, a neighbour's from the concurrency where the current config peaked. `brute_force`
measures every candidate at every concurrency of the ladder within the budget: the reference the bench holds the
search to. Both are pure: the evaluation is injected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from modelship.serve.tune.concurrency import Evaluation
from modelship.serve.tune.measurement import Budget, CandidateRefused, Point
from modelship.serve.tune.space import Candidate, Space

MIN_GAIN = 0.03  # a neighbour must beat the current config's throughput by this share to be moved to


@dataclass
class Search:
    """Every candidate evaluated, in order; the one it started from; the one it settled on (`chosen`: a neighbour
    replaces it only by a margin beyond noise); why it stopped early (None: it converged)."""

    budget: Budget
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
        return max(self.evaluations.values(), key=lambda e: e.score(self.budget))

    @property
    def points(self) -> list[Point]:
        return [p for e in self.evaluations.values() for p in e.points]


Evaluate = Callable[[Candidate, int], Evaluation]  # a candidate, the concurrency to start at
Progress = Callable[[Search], None]
ShouldStop = Callable[[], str | None]


def hill_climb(
    space: Space,
    start: Candidate,
    evaluate: Evaluate,
    budget: Budget,
    *,
    should_stop: ShouldStop = lambda: None,
    progress: Progress = lambda search: None,
) -> Search:
    """Climb from `start` (moved onto the grid) until no neighbour gains MIN_GAIN, or `should_stop` names a reason."""
    search = Search(budget, start)

    def visit(candidate: Candidate, concurrency: int = 1) -> Evaluation:
        if candidate not in search.evaluations:
            search.evaluations[candidate] = evaluate(candidate, concurrency)
            progress(search)
        return search.evaluations[candidate]

    current = visit(start)
    while True:
        search.chosen = current.candidate
        best = current
        for neighbour in space.neighbours(current.candidate):
            search.stopped = should_stop()
            if search.stopped is not None:
                search.chosen = best.candidate
                return search
            tried = visit(neighbour, current.best.concurrency if current.best else 1)
            if _beats(tried, best, budget):
                best = tried
        if best is current:
            return search
        current = best


def _beats(challenger: Evaluation, holder: Evaluation, budget: Budget) -> bool:
    mine, theirs = challenger.score(budget), holder.score(budget)
    if mine[0] != theirs[0]:
        return mine[0] > theirs[0]
    if mine[0] == 0:
        return mine[1] > theirs[1]
    return mine[1] > theirs[1] * (1 + MIN_GAIN)


def brute_force(
    space: Space, measure: Callable[[Candidate, int], Point], budget: Budget, progress: Progress = lambda search: None
) -> Search:
    """Every candidate at every concurrency of the ladder up to its first point over the p99 budget (in a closed
    loop more clients only queue longer, so no point above it can be within the budget)."""
    search = Search(budget, next(space.candidates()))
    for candidate in space.candidates():
        points: list[Point] = []
        try:
            for concurrency in space.concurrencies():
                points.append(measure(candidate, concurrency))
                if points[-1].p99_ms > budget.p99_ms:
                    break
        except CandidateRefused as exc:
            search.evaluations[candidate] = Evaluation(candidate, tuple(points), skipped=exc.message)
            continue
        within = [p for p in points if p.within(budget)]
        best = max(within, key=lambda p: p.throughput) if within else None
        search.evaluations[candidate] = Evaluation(candidate, tuple(points), best)
        progress(search)
    return search
