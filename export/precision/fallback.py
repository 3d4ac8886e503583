"""What to keep in higher precision, searched apart from what judges it (Polygraphy's `debug precision` markers):
a search proposes the set of parts (modules, nodes) to keep, the caller judges the variant built with that set
kept and reports the verdict, until the search has its answer.

    search = Bisect(modules)                  # or Grow(ranked_nodes)
    while (chosen := search.next()) is not None:
        search.step(judge(chosen))            # True: the variant built keeping `chosen` passes
    search.result                             # the set found, or None when no set tried passed

- `Bisect(candidates)`: all of them first (None when even that fails), then halves dropped while the rest still
  passes: a small set that passes (the fp16 ONNX variant's modules kept in fp32).
- `Grow(ranked)`: the worst 1, 2, 3, 4, 6, 9, ... of an ordered list (each step about half again), the first that
  passes (the INT8 variant's nodes kept float).

Both are plain state machines over the verdicts they are given: tests drive them with a fake judge.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

Plan = Generator[list[str], bool, list[str] | None]


class KeepSearch:
    """A search driven by verdicts: `next()` the set to judge (None once done), `step(passed)` its verdict,
    `result` the set found (None: none passed), `judged` how many verdicts it took."""

    def __init__(self, plan: Plan) -> None:
        self._plan = plan
        self._next: list[str] | None = None
        self.result: list[str] | None = None
        self.judged = 0
        self._advance(None)

    def next(self) -> list[str] | None:
        return None if self._next is None else list(self._next)

    def step(self, passed: bool) -> None:
        if self._next is None:
            raise RuntimeError("the search is over: nothing to judge")
        self.judged += 1
        self._advance(passed)

    def _advance(self, verdict: bool | None) -> None:
        try:
            self._next = next(self._plan) if verdict is None else self._plan.send(verdict)
        except StopIteration as done:
            self._next, self.result = None, done.value


class Bisect(KeepSearch):
    """A small subset of `candidates` that passes (see the module doc)."""

    def __init__(self, candidates: Sequence[str]) -> None:
        super().__init__(_bisect_all(list(candidates)))


class Grow(KeepSearch):
    """The first `ranked[:n]` that passes, n = 1, 2, 3, 4, 6, 9, ... up to all of them."""

    def __init__(self, ranked: Sequence[str]) -> None:
        super().__init__(_grow(list(ranked)))


def _bisect_all(candidates: list[str]) -> Plan:
    if not candidates or not (yield candidates):
        return None
    return (yield from _halve(candidates, []))


def _halve(candidates: list[str], kept: list[str]) -> Generator[list[str], bool, list[str]]:
    """A small subset S of `candidates` such that S + `kept` passes, by halving (each half is dropped when the rest
    passes without it); called when `candidates` + `kept` passes."""
    if (yield list(kept)):
        return []
    if len(candidates) <= 1:
        return list(candidates)
    half = len(candidates) // 2
    first, second = candidates[:half], candidates[half:]
    chosen = yield from _halve(first, [*kept, *second])
    return chosen + (yield from _halve(second, [*kept, *chosen]))


def _grow(ranked: list[str]) -> Plan:
    count = 1
    while ranked:
        chosen = ranked[:count]
        if (yield chosen):
            return chosen
        if count >= len(ranked):
            break
        count = min(max(count + 1, count * 3 // 2), len(ranked))
    return None
