"""The tune bench's verdict on a known surface (tests/test_tune_search.py's): the search against brute force is
judged on both bests measured again side by side, not on the best of brute force's hundreds of noisy points."""

from __future__ import annotations

from test_tune_search import DEFAULT, SPACE, surface

from modelship.bench.suites.tune import _rows, _side_by_side
from modelship.serve.tune.constraints import Constraints
from modelship.serve.tune.measurement import Point
from modelship.serve.tune.search import BruteForce, HillClimb, drive
from modelship.serve.tune.space import Candidate


def test_the_ratio_is_the_two_bests_measured_again_not_brute_forces_luckiest_point() -> None:
    budget = Constraints(40.0)
    calls: list[tuple[Candidate, int]] = []

    def lucky_once(candidate: Candidate, concurrency: int) -> Point:
        """The surface, but brute force's first measurement of each point reads 20% high (a lucky window)."""
        point = surface(candidate, concurrency)
        calls.append((candidate, concurrency))
        lucky = 1.2 if calls.count((candidate, concurrency)) == 1 else 1.0
        return Point(candidate, concurrency, point.throughput * lucky, point.p50_ms, point.p99_ms)

    brute = drive(BruteForce(SPACE, budget), lucky_once)
    search = drive(HillClimb(SPACE, DEFAULT, budget), surface)
    assert search.best.throughput < 0.9 * brute.best.throughput  # as found: the lucky point wins
    again = _side_by_side(lucky_once, brute, search, budget, lambda line: None)
    assert 0.95 <= again.ratio <= 1.05 and len(again.rounds) == 3
    row = _rows("m", brute, 60.0, search, 6.0, again)[0]
    assert row.ratio == again.ratio and "as found 0.8" in row.notes
