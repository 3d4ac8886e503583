"""The INT8 planner: every decision of the INT8 variant, apart from what quantizes, judges and times. It is given an
`Oracle` (quantize one recipe and judge it on the held-back inputs; rank the quantized nodes of a try; time a
passing recipe against fp32) and decides, purely:

1. Which recipes are judged, in order (`judged_recipes`): the first timed recipe (`Timed.order`: not slower than
   fp32, then the fewest Q/DQ pairs ONNX Runtime leaves unfused, then the fastest) with per-channel and, static,
   per-tensor weights, in every weight range the target CPU allows, all judged (the closest passing kept).
2. The closest try (contract.artifact_details.Int8Try.closeness) is refined: a static recipe tries percentile
   calibration once, then the nodes worth most kept float (`Ranking.nodes`: what keeping each float does to the
   answer, per speed it costs) are kept float, grown by the one keep-in-higher-precision search
   (export.precision.fallback.Grow: 1, 2, 3, 4, 6, 9, ... never more than MAX_FLOAT_SHARE of the quantized nodes),
   stopping at the first that passes.
3. Then, while none passes and tries remain, the other timed recipes (the weight ops alone, the other activation
   type), except those measured slower than fp32, which could not ship (--keep-slower judges them). A recipe ONNX
   Runtime's quantizer fails on is one failed try, recorded with its reason, and the search goes on (when none of
   the first quantizes, the next recipe that does is the one refined). At most `trials` tries in all.
4. The outcome (`Outcome`): shipped, or declined in one line naming why (every recipe failed to quantize; none was
   accurate enough, with the closest figures reached; accurate but slower than fp32 at a batch).

tests/test_int8_planner.py drives it with fake oracles through every outcome, without ONNX Runtime.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol

from modelship.contract.artifact_details import Int8Try
from modelship.contract.errors import ExportError
from modelship.contract.parity_report import ParityReport
from modelship.export.precision.fallback import Grow
from modelship.export.precision.int8.recipe import Calibration, Int8Recipe, Mode

INT8_TRIALS = 12  # quantizations tried in all (each a quantization, a verdict on the held-back inputs and a timing)
MAX_FLOAT_SHARE = 0.5  # of the quantized nodes, at most this share is kept float
NAME = "onnx_int8"


@dataclass(frozen=True)
class Judged:
    """One recipe tried: its verdict on the held-back inputs (None: ONNX Runtime's quantizer failed on it, `record`
    says why) and the record the manifest keeps."""

    recipe: Int8Recipe
    report: ParityReport | None
    record: Int8Try

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed


@dataclass(frozen=True)
class Ranking:
    """What keeping each quantized node float gains (`gains`: the error it removes from the answer, or the error it
    adds on its own; the larger, the sooner kept float), what that measures (for the choices), and what each costs
    kept float (`costs`: its share of the graph's integer work, which then runs in float behind a Q/DQ pair)."""

    gains: dict[str, float]
    measure: str
    costs: dict[str, float] = field(default_factory=dict)

    @property
    def nodes(self) -> list[str]:
        """The nodes worth keeping float, the most gain per cost first: a node's cost is 1 (the Q/DQ pair around
        it) plus its share of the integer work in units of the average node's (a large convolution kept float
        costs more speed than an Add); a node whose gain is not positive is left out (keeping it float helps
        nothing)."""
        count = len(self.gains)

        def value(name: str) -> float:
            return self.gains[name] / (1.0 + count * self.costs.get(name, 0.0))

        return sorted((name for name, gain in self.gains.items() if gain > 0), key=lambda name: -value(name))


@dataclass(frozen=True)
class Timed:
    """A base recipe, its speed against fp32 at the largest verified batch (0: the quantizer failed on it) and the
    Q/DQ pairs ONNX Runtime left unfused in it (None: not counted)."""

    recipe: Int8Recipe
    ratio: float
    pairs_left: int | None = None

    def order(self) -> tuple[bool, bool, int, float]:
        """Sorts the recipe to judge first first: not slower than fp32, then the fewest Q/DQ pairs left (a count,
        where a timing is noisy), then the faster; one the quantizer failed on last."""
        return (self.ratio < 1, self.ratio <= 0, self.pairs_left or 0, -self.ratio)


class Oracle(Protocol):
    """What the planner asks of the world: quantize and judge one recipe; rank a try's quantized nodes (an
    ExportError when it cannot); time a recipe against fp32 (fp32 time / INT8 time by batch)."""

    def attempt(self, recipe: Int8Recipe) -> Judged: ...

    def rank(self, judged: Judged) -> Ranking: ...

    def time(self, recipe: Int8Recipe) -> dict[str, float]: ...


class Outcome(StrEnum):
    SHIPPED = "shipped"
    UNQUANTIZABLE = "unquantizable"  # every recipe failed to quantize
    INACCURATE = "inaccurate"  # no try passed the bars
    SLOWER = "slower"  # passed, and measured slower than fp32


@dataclass
class Plan:
    """What the planner decided: `chosen`, the passing try or else the closest that quantized (None: none did);
    every try's record in order; the choices made (for the manifest); the chosen recipe's speed; the outcome and,
    unless shipped, the one line that declines it."""

    chosen: Judged | None
    tries: list[Int8Try] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    speedups: dict[str, float] = field(default_factory=dict)
    outcome: Outcome = Outcome.SHIPPED
    declined: str | None = None

    @property
    def passed(self) -> bool:
        return self.chosen is not None and self.chosen.passed


def plan(
    timed: Sequence[Timed],
    ranges: Sequence[bool],
    oracle: Oracle,
    *,
    keep_slower: bool = False,
    percentile: bool = False,
    trials: int = INT8_TRIALS,
) -> Plan:
    """Judge the recipes, refine the closest, time the one that passes and decide (see the module doc). `timed`:
    the base recipes (judged in Timed.order); `ranges`: the reduce_range values judged (7-bit: True)."""
    done = Plan(None)
    timed = sorted(timed, key=Timed.order)

    def tried(recipe: Int8Recipe) -> Judged:
        judged = oracle.attempt(recipe)
        done.tries.append(judged.record)
        return judged

    candidates, pair = judged_recipes(timed, ranges, keep_slower, done.why)
    first, rest = candidates[:pair], candidates[pair:]
    judged = [tried(recipe) for recipe in first]
    while rest and _closest(judged) is None:  # nothing quantized yet: the next recipe is the one refined
        judged.append(tried(rest.pop(0)))
    done.chosen = _closest(judged)
    if done.chosen is not None and not done.passed and len(done.tries) < trials:
        _refine(done, oracle, tried, percentile, trials)
    while rest and not done.passed and len(done.tries) < trials:  # the other recipes, whole, with what is left
        done.chosen = _closest([j for j in (done.chosen, tried(rest.pop(0))) if j is not None])
    if done.passed:
        assert done.chosen is not None
        done.speedups = oracle.time(done.chosen.recipe)
    done.outcome, done.declined = decide(done, keep_slower)
    return done


def judged_recipes(
    timed: Sequence[Timed], ranges: Sequence[bool], keep_slower: bool, why: list[str]
) -> tuple[list[Int8Recipe], int]:
    """The recipes judged, in order, and how many of the first are all judged (see the module doc, 1)."""
    fastest = timed[0].recipe
    first = [fastest] + ([replace(fastest, per_channel=False)] if fastest.mode is Mode.STATIC else [])
    first = [replace(recipe, reduce_range=r) for r in ranges for recipe in first]
    slower = [t for t in timed[1:] if 0 < t.ratio < 1 and not keep_slower]
    if slower:
        shown = ", ".join(f"{timed_part(t.recipe)} ({t.ratio:.2f}x)" for t in slower)
        why.append(f"not judged, slower than fp32 here: {shown} (--keep-slower judges it)")
    return [*first, *(t.recipe for t in timed[1:] if t not in slower)], len(first)


def timed_part(recipe: Int8Recipe) -> str:
    """The part of a recipe's description the timed recipes differ in: static activations, dynamic weights."""
    return recipe.describe().split(", ")[0 if recipe.mode is Mode.STATIC else 2]


def _refine(done: Plan, oracle: Oracle, tried: _Tried, percentile: bool, trials: int) -> None:
    """Percentile calibration once for a static recipe, then the worst nodes kept float (see the module doc, 2)."""
    assert done.chosen is not None
    if percentile and done.chosen.recipe.mode is Mode.STATIC:
        retry = tried(replace(done.chosen.recipe, method=Calibration.PERCENTILE))
        if retry.passed:
            done.why.append("percentile calibration (99.999%): minmax ranges left the verdict failing")
        done.chosen = _closest([done.chosen, retry])
    if not done.passed and len(done.tries) < trials:
        _keep_worst_float(done, oracle, tried, trials)


class _Tried(Protocol):
    def __call__(self, recipe: Int8Recipe) -> Judged: ...


def _keep_worst_float(done: Plan, oracle: Oracle, tried: _Tried, trials: int) -> None:
    """The chosen recipe's worst nodes kept float, grown until one passes or the tries run out; the closest try
    stays chosen."""
    assert done.chosen is not None
    start = done.chosen
    try:
        ranking = oracle.rank(start)
    except ExportError as exc:
        done.why.append(f"no node kept float: ranking the quantized nodes failed ({exc.message})")
        return
    ranked = [name for name in ranking.nodes if name not in start.recipe.excluded]
    search = Grow(ranked[: int(len(ranking.gains) * MAX_FLOAT_SHARE)])
    while (chosen := search.next()) is not None and len(done.tries) < trials:
        judged = tried(start.recipe.excluding(chosen))
        done.chosen = _closest([start if done.chosen is None else done.chosen, judged])
        search.step(judged.passed)
    if search.result:
        shown = ", ".join(f"{n} ({_db(ranking.gains[n])})" for n in search.result[:3])
        more = ", ..." if len(search.result) > 3 else ""
        done.why.append(f"{len(search.result)} nodes kept float, chosen by {ranking.measure} ({shown}{more})")


def _closest(judged: Sequence[Judged]) -> Judged | None:
    """The closest try that quantized (a passing one first; among equals the earlier)."""
    ran = [j for j in judged if j.report is not None]
    return min(ran, key=lambda j: j.record.closeness()) if ran else None


def decide(done: Plan, keep_slower: bool) -> tuple[Outcome, str | None]:
    """The outcome, and the one line that declines the variant unless it ships (`speedups`: fp32 / INT8 time)."""
    if done.chosen is None:
        first = next((t.failures[0] for t in done.tries if t.failures), "no recipe tried")
        return (
            Outcome.UNQUANTIZABLE,
            f"{NAME} not written: ONNX Runtime's quantizer failed on every recipe tried ({first})",
        )
    if not done.passed:
        best = done.chosen.record
        named = best.failures[:1]  # the figures it names are not repeated
        shown = [f"{label} {value:.4f}" for label, value in _figures(best) if not any(label in f for f in named)]
        interval = (
            f" (95% interval of its top-1 agreement on {best.judged} held-back inputs: "
            f"{best.interval[0]:.2f}-{best.interval[1]:.2f})"
            if best.interval
            else ""
        )
        return Outcome.INACCURATE, (
            f"{NAME} not written: not accurate enough on the held-back inputs after {len(done.tries)} tries; the "
            f"closest, {best.recipe}: {', '.join([*named, *shown])}{interval}"
        )
    slower = {batch: ratio for batch, ratio in done.speedups.items() if ratio < 1.0}
    if slower and not keep_slower:
        lost = ", ".join(f"{ratio:.2f}x fp32 at {batch}" for batch, ratio in slower.items())
        return (
            Outcome.SLOWER,
            f"{NAME} not written: slower than fp32 on this CPU ({lost}); --keep-slower writes it anyway",
        )
    return Outcome.SHIPPED, None


def _figures(record: Int8Try) -> list[tuple[str, float]]:
    figures = [("top-1 agreement", record.top1_agreement), ("cosine", record.cosine)]
    return [(label, value) for label, value in figures if value is not None]


def _db(share: float) -> str:
    """Noise added, as a share of the signal's power, in dB."""
    return f"noise at {10 * math.log10(share):.0f} dB" if share > 0 else "no noise"
