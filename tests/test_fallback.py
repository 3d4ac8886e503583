"""The one keep-in-higher-precision search (export.precision.fallback) on fake judges: no model, no runtime."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from modelship.export.precision.fallback import Bisect, Grow, KeepSearch

PARTS = [f"m{i}" for i in range(16)]


def drive(search: KeepSearch, judge: Callable[[list[str]], bool]) -> list[list[str]]:
    """Judge every set the search proposes; the sets, in order."""
    asked = []
    while (chosen := search.next()) is not None:
        asked.append(chosen)
        search.step(judge(chosen))
    return asked


@pytest.mark.parametrize("needed", [{"m3"}, {"m0", "m15"}, {"m5", "m6", "m7"}, set(PARTS[:9])])
def test_bisect_finds_exactly_the_parts_that_must_stay(needed: set[str]) -> None:
    search = Bisect(PARTS)
    asked = drive(search, lambda kept: needed <= set(kept))
    assert asked[0] == PARTS and set(search.result or []) == needed
    assert search.judged == len(asked) <= 2 * len(needed) * 4 + 2  # halving: a few verdicts per part kept


def test_bisect_answers_none_when_keeping_everything_fails() -> None:
    search = Bisect(PARTS)
    assert drive(search, lambda kept: False) == [PARTS] and search.result is None


def test_bisect_keeps_nothing_when_nothing_needs_keeping() -> None:
    search = Bisect(PARTS)
    assert drive(search, lambda kept: True) == [PARTS, []] and search.result == []


def test_a_budget_spent_counts_as_failing_and_keeps_more() -> None:
    """The fp16 bisection's cap: past it every set fails, so what was not cleared stays (never a failing set)."""
    needed, budget = {"m3"}, 4
    verdicts = iter(range(100))
    search = Bisect(PARTS)
    drive(search, lambda kept: next(verdicts) < budget and needed <= set(kept))
    assert needed <= set(search.result or []) and len(search.result or []) > 1


@pytest.mark.parametrize(
    ("needed", "sizes"), [(1, [1]), (3, [1, 2, 3]), (5, [1, 2, 3, 4, 6]), (10, [1, 2, 3, 4, 6, 9, 13])]
)
def test_grow_tries_1_2_3_4_6_9_of_the_ranked_until_one_passes(needed: int, sizes: list[int]) -> None:
    search = Grow(PARTS)
    asked = drive(search, lambda kept: len(kept) >= needed)
    assert [len(a) for a in asked] == sizes and search.result == PARTS[: sizes[-1]]


def test_grow_ends_at_all_of_them_and_answers_none_when_none_passes() -> None:
    search = Grow(PARTS[:5])
    assert [len(a) for a in drive(search, lambda kept: False)] == [1, 2, 3, 4, 5] and search.result is None
    assert Grow([]).next() is None and Grow([]).result is None


def test_a_finished_search_refuses_another_verdict() -> None:
    search = Grow(["a"])
    search.step(True)
    with pytest.raises(RuntimeError, match="over"):
        search.step(True)
