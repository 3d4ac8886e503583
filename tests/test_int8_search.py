"""The INT8 search on fakes (export.int8_search): no ONNX Runtime, no model. Each outcome a user can meet: a recipe
passes at once; the closest of the first pair is kept; a recipe that ONNX Runtime's quantizer fails on is one
failed try and the search goes on; every recipe failing to quantize; nodes kept float until it passes; never
accurate enough (declined with the closest figures); accurate but slower (declined unless --keep-slower)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from modelship.contract.artifact_details import Int8Try
from modelship.contract.errors import ExportError
from modelship.export.int8 import Int8Recipe
from modelship.export.int8_search import INT8_TRIALS, Judged, Ranking, decline, search
from modelship.parity import ParityReport

U8 = Int8Recipe(activations="uint8")
U8_TENSOR = replace(U8, per_channel=False)
S8 = Int8Recipe(activations="int8")
NODES = [f"Conv_{i}" for i in range(20)]  # worst first


def judged(recipe: Int8Recipe, passed: bool, cosine: float, agreement: float = 1.0) -> Judged:
    report = ParityReport("eager", "onnx_int8", [8], [], passed, 0.0)
    failures = [] if passed else [f"logits: cosine {cosine} < 0.99"]
    record = Int8Try(recipe.describe(), passed, failures, int(not passed), cosine, agreement)
    return Judged(recipe, report, record)


def raised(recipe: Int8Recipe) -> Judged:
    reason = f"ONNX Runtime's quantizer failed on this graph with {recipe.describe()}: inhomogeneous shape"
    return Judged(recipe, None, Int8Try(recipe.describe(), False, [reason], 3, raised=True))


class Fake:
    """An oracle: `verdict(recipe)` says what quantizing and judging `recipe` gives; every call is recorded."""

    def __init__(self, verdict: Callable[[Int8Recipe], Judged]) -> None:
        self.verdict = verdict
        self.tried: list[Int8Recipe] = []
        self.ranked = 0

    def attempt(self, recipe: Int8Recipe) -> Judged:
        self.tried.append(recipe)
        return self.verdict(recipe)

    def rank(self, chosen: Judged) -> Ranking:
        self.ranked += 1
        return Ranking(list(NODES), {n: 0.1 / (i + 1) for i, n in enumerate(NODES)}, "their own error")


def float_until(kept: int) -> Callable[[Int8Recipe], Judged]:
    """Fails (closer with every node kept float) until `kept` of the worst nodes are."""
    return lambda recipe: judged(recipe, len(recipe.excluded) >= kept, 0.98 + 0.001 * len(recipe.excluded))


def test_the_first_recipe_passes_and_nothing_else_is_tried() -> None:
    fake = Fake(lambda recipe: judged(recipe, True, 0.999))
    done = search([U8, S8], 1, fake.attempt, fake.rank)
    assert done.passed and done.chosen is not None and done.chosen.recipe == U8
    assert fake.tried == [U8] and fake.ranked == 0 and decline(done, {"batch 1": 1.5}, False) is None


def test_the_first_pair_is_judged_whole_and_the_closer_passing_kept() -> None:
    fake = Fake(lambda recipe: judged(recipe, True, 0.999 if recipe.per_channel else 0.9995))
    done = search([U8, U8_TENSOR, S8], 2, fake.attempt, fake.rank)
    assert fake.tried == [U8, U8_TENSOR] and done.chosen is not None and done.chosen.recipe == U8_TENSOR


def test_a_recipe_the_quantizer_fails_on_is_one_failed_try_and_the_search_goes_on() -> None:
    fake = Fake(
        lambda recipe: raised(recipe) if recipe.method == "percentile" or recipe == U8 else float_until(2)(recipe)
    )
    done = search([U8, S8], 1, fake.attempt, fake.rank, percentile=True)
    assert done.tries[0].raised and "inhomogeneous" in done.tries[0].failures[0]
    assert done.passed and done.chosen is not None and done.chosen.recipe.excluded == tuple(NODES[:2])
    assert [t.raised for t in done.tries] == [True, False, True, False, False]  # U8, S8, percentile, 1 float, 2


def test_every_recipe_failing_to_quantize_is_declined_by_the_quantizers_reason() -> None:
    fake = Fake(raised)
    done = search([U8, S8], 1, fake.attempt, fake.rank, percentile=True)
    assert done.chosen is None and len(done.tries) == 2 and fake.ranked == 0
    reason = decline(done, {}, False)
    assert reason is not None and "quantizer failed on every recipe" in reason and "inhomogeneous" in reason


@pytest.mark.parametrize("kept", [1, 2, 3, 4, 6])
def test_the_worst_nodes_are_kept_float_growing_until_it_passes(kept: int) -> None:
    fake = Fake(float_until(kept))
    done = search([U8], 1, fake.attempt, fake.rank)
    assert done.passed and done.chosen is not None and done.chosen.recipe.excluded == tuple(NODES[:kept])
    floats = [len(r.excluded) for r in fake.tried]
    assert floats == [0, *[n for n in (1, 2, 3, 4, 6) if n <= kept]]
    assert any(f"{kept} nodes kept float" in why for why in done.why)


def test_never_accurate_enough_is_declined_with_the_closest_figures_after_every_try() -> None:
    fake = Fake(float_until(len(NODES) + 1))
    done = search([U8, S8], 1, fake.attempt, fake.rank, percentile=True)
    assert not done.passed and len(done.tries) == INT8_TRIALS
    assert max(len(r.excluded) for r in fake.tried) <= len(NODES) // 2  # never more than half the nodes float
    reason = decline(done, {}, False)
    assert reason is not None and reason.startswith("onnx_int8 not written: not accurate enough")
    assert f"after {INT8_TRIALS} tries" in reason and done.chosen is not None
    closest = done.chosen.record
    assert f"the closest, {closest.recipe}: {closest.failures[0]}, top-1 agreement 1.0000" in reason, reason
    assert reason.count("cosine") == 1


def test_a_static_recipe_tries_percentile_calibration_once() -> None:
    fake = Fake(lambda recipe: judged(recipe, recipe.method == "percentile", 0.985))
    done = search([U8], 1, fake.attempt, fake.rank, percentile=True)
    assert [r.method for r in fake.tried] == ["minmax", "percentile"] and done.passed
    assert any("percentile calibration" in why for why in done.why)
    dynamic = Int8Recipe(mode="dynamic")
    fake = Fake(float_until(1))
    search([dynamic], 1, fake.attempt, fake.rank, percentile=True)
    assert "percentile" not in {r.method for r in fake.tried}


def test_a_ranking_that_fails_stops_the_search_at_the_closest() -> None:
    def rank(chosen: Judged) -> Ranking:
        raise ExportError("RuntimeError: no activations")

    fake = Fake(float_until(3))
    done = search([U8, S8], 1, fake.attempt, rank)
    assert not done.passed and len(done.tries) == 2
    assert any("ranking the quantized nodes failed" in why for why in done.why)


def test_a_passing_variant_slower_than_fp32_is_declined_unless_kept() -> None:
    fake = Fake(lambda recipe: judged(recipe, True, 0.999))
    done = search([U8], 1, fake.attempt, fake.rank)
    reason = decline(done, {"batch 1": 0.8, "batch 7": 1.1}, keep_slower=False)
    assert reason is not None and "slower than fp32" in reason and "0.80x fp32 at batch 1" in reason
    assert decline(done, {"batch 1": 0.8}, keep_slower=True) is None
