"""The INT8 planner on fake oracles (export.precision.int8.planner): no ONNX Runtime, no model. Every outcome a user
can meet: a recipe passes at once; the closest of the first pair is kept; a recipe ONNX Runtime's quantizer fails
on is one failed try and the search goes on; every recipe failing to quantize; nodes kept float until it passes;
never accurate enough (declined with the closest figures); accurate but slower (declined unless --keep-slower);
recipes measured slower than fp32 not judged; and a decline failing the export under --require-variants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from modelship.contract.artifact_details import Int8Details, Int8Try
from modelship.contract.errors import ExportError
from modelship.contract.manifest import Declined
from modelship.contract.parity_report import ParityReport
from modelship.export.precision.int8.planner import INT8_TRIALS, Judged, Outcome, Ranking, Timed, plan
from modelship.export.precision.int8.recipe import Activations, Calibration, Int8Recipe, Mode
from modelship.export.precision.registry import refuse_declined

U8 = Int8Recipe(activations=Activations.UINT8)
S8 = Int8Recipe(activations=Activations.INT8)
TIMED = [Timed(U8, 3.0), Timed(S8, 1.2)]
SEVEN_BIT = (True,)
NODES = [f"Conv_{i}" for i in range(40)]  # worst first
FAST = {"batch 1": 2.0, "batch 7": 3.0}


def judged(recipe: Int8Recipe, passed: bool, cosine: float, agreement: float = 1.0) -> Judged:
    report = ParityReport("eager", "onnx_int8", [8], [], passed, 0.0)
    failures = [] if passed else [f"logits: cosine {cosine} below 0.99"]
    return Judged(recipe, report, Int8Try(recipe.describe(), passed, failures, int(not passed), cosine, agreement))


def raised(recipe: Int8Recipe) -> Judged:
    reason = f"ONNX Runtime's quantizer failed on this graph with {recipe.describe()}: inhomogeneous shape"
    return Judged(recipe, None, Int8Try(recipe.describe(), False, [reason], 3, raised=True))


class Fake:
    """An oracle: `verdict(recipe)` says what quantizing and judging `recipe` gives; every call is recorded."""

    def __init__(self, verdict: Callable[[Int8Recipe], Judged], speed: dict[str, float] | None = None) -> None:
        self.verdict = verdict
        self.speed = FAST if speed is None else speed
        self.tried: list[Int8Recipe] = []
        self.ranked = 0
        self.timed: list[Int8Recipe] = []

    def attempt(self, recipe: Int8Recipe) -> Judged:
        self.tried.append(recipe)
        return self.verdict(recipe)

    def rank(self, chosen: Judged) -> Ranking:
        self.ranked += 1
        return Ranking({n: 0.1 / (i + 1) for i, n in enumerate(NODES)}, "their own error")

    def time(self, recipe: Int8Recipe) -> dict[str, float]:
        self.timed.append(recipe)
        return self.speed


def float_until(kept: int) -> Callable[[Int8Recipe], Judged]:
    """Fails (closer with every node kept float) until `kept` of the worst nodes are."""
    return lambda recipe: judged(recipe, len(recipe.excluded) >= kept, 0.98 + 0.001 * len(recipe.excluded))


def test_the_first_recipe_passes_ships_and_nothing_else_is_tried() -> None:
    fake = Fake(lambda recipe: judged(recipe, True, 0.999))
    done = plan([Timed(Int8Recipe(mode=Mode.DYNAMIC), 2.0)], SEVEN_BIT, fake)
    assert done.outcome is Outcome.SHIPPED and done.declined is None and done.speedups == FAST
    assert fake.tried == [Int8Recipe(mode=Mode.DYNAMIC)] and fake.ranked == 0 and fake.timed == fake.tried


def test_the_first_pair_is_judged_whole_and_the_closer_passing_kept() -> None:
    fake = Fake(lambda recipe: judged(recipe, True, 0.999 if recipe.per_channel else 0.9995))
    done = plan(TIMED, SEVEN_BIT, fake)
    assert fake.tried == [U8, replace(U8, per_channel=False)]  # per-channel and per-tensor weights, then stop
    assert done.chosen is not None and not done.chosen.recipe.per_channel and done.outcome is Outcome.SHIPPED


def test_every_weight_range_the_target_allows_is_in_the_first_group() -> None:
    fake = Fake(lambda recipe: judged(recipe, True, 0.999 if recipe.reduce_range else 0.9999))
    done = plan(TIMED, (True, False), fake)
    assert [(r.per_channel, r.reduce_range) for r in fake.tried] == [
        (True, True), (False, True), (True, False), (False, False)
    ]  # fmt: skip
    assert done.chosen is not None and not done.chosen.recipe.reduce_range


def test_a_recipe_the_quantizer_fails_on_is_one_failed_try_and_the_search_goes_on() -> None:
    failing = {U8, replace(U8, per_channel=False), replace(S8, method=Calibration.PERCENTILE)}
    fake = Fake(lambda recipe: raised(recipe) if recipe in failing else float_until(2)(recipe))
    done = plan(TIMED, SEVEN_BIT, fake, percentile=True)
    assert [t.raised for t in done.tries] == [True, True, False, True, False, False]  # U8 x2, S8, percentile, 1, 2
    assert "inhomogeneous" in done.tries[0].failures[0]
    assert done.outcome is Outcome.SHIPPED and done.chosen is not None
    assert done.chosen.recipe.excluded == tuple(NODES[:2])


def test_every_recipe_failing_to_quantize_is_declined_by_the_quantizers_reason() -> None:
    fake = Fake(raised)
    done = plan(TIMED, SEVEN_BIT, fake, percentile=True)
    assert done.chosen is None and len(done.tries) == 3 and fake.ranked == 0 and fake.timed == []
    assert done.outcome is Outcome.UNQUANTIZABLE and done.declined is not None
    assert "quantizer failed on every recipe" in done.declined and "inhomogeneous" in done.declined


@pytest.mark.parametrize("kept", [1, 2, 3, 4, 6])
def test_the_worst_nodes_are_kept_float_growing_until_it_passes(kept: int) -> None:
    fake = Fake(float_until(kept))
    done = plan([Timed(Int8Recipe(mode=Mode.DYNAMIC), 2.0)], SEVEN_BIT, fake)
    assert done.outcome is Outcome.SHIPPED and done.chosen is not None
    assert done.chosen.recipe.excluded == tuple(NODES[:kept])
    assert [len(r.excluded) for r in fake.tried] == [0, *[n for n in (1, 2, 3, 4, 6) if n <= kept]]
    assert any(f"{kept} nodes kept float" in why for why in done.why) and fake.timed == [done.chosen.recipe]


def test_never_accurate_enough_is_declined_with_the_closest_figures_after_every_try() -> None:
    fake = Fake(float_until(len(NODES) + 1))
    done = plan(TIMED, SEVEN_BIT, fake, percentile=True)
    assert done.outcome is Outcome.INACCURATE and len(done.tries) == INT8_TRIALS and fake.timed == []
    assert max(len(r.excluded) for r in fake.tried) <= len(NODES) // 2  # never more than half the nodes float
    reason, closest = done.declined, done.chosen
    assert reason is not None and closest is not None
    assert reason.startswith(f"onnx_int8 not written: not accurate enough on the held-back inputs after {INT8_TRIALS}")
    assert f"the closest, {closest.record.recipe}: {closest.record.failures[0]}, top-1 agreement 1.0000" in reason
    assert reason.count("cosine") == 1  # a figure the failure names is not repeated


def test_a_static_recipe_tries_percentile_calibration_once() -> None:
    fake = Fake(lambda recipe: judged(recipe, recipe.method is Calibration.PERCENTILE, 0.985))
    done = plan(TIMED[:1], SEVEN_BIT, fake, percentile=True)
    assert [r.method for r in fake.tried][-1] is Calibration.PERCENTILE and done.passed
    assert sum(r.method is Calibration.PERCENTILE for r in fake.tried) == 1
    assert any("percentile calibration" in why for why in done.why)
    fake = Fake(float_until(1))
    plan([Timed(Int8Recipe(mode=Mode.DYNAMIC), 2.0)], SEVEN_BIT, fake, percentile=True)
    assert Calibration.PERCENTILE not in {r.method for r in fake.tried}  # dynamic recipes calibrate nothing


def test_a_ranking_that_fails_stops_the_search_at_the_closest() -> None:
    class NoRanking(Fake):
        def rank(self, chosen: Judged) -> Ranking:
            raise ExportError("RuntimeError: no activations")

    fake = NoRanking(float_until(3))
    done = plan(TIMED, SEVEN_BIT, fake)
    assert done.outcome is Outcome.INACCURATE and len(done.tries) == 3
    assert any("ranking the quantized nodes failed" in why for why in done.why)


def test_a_passing_variant_slower_than_fp32_is_declined_unless_kept() -> None:
    slow = {"batch 1": 0.8, "batch 7": 1.1}
    done = plan(TIMED, SEVEN_BIT, Fake(lambda recipe: judged(recipe, True, 0.999), slow))
    assert done.outcome is Outcome.SLOWER and done.declined is not None
    assert "slower than fp32" in done.declined and "0.80x fp32 at batch 1" in done.declined
    kept = plan(TIMED, SEVEN_BIT, Fake(lambda recipe: judged(recipe, True, 0.999), slow), keep_slower=True)
    assert kept.outcome is Outcome.SHIPPED and kept.declined is None


def test_a_recipe_measured_slower_than_fp32_is_not_judged_unless_kept() -> None:
    slow_s8 = [Timed(U8, 1.3), Timed(S8, 0.7)]
    fake = Fake(float_until(100))
    done = plan(slow_s8, SEVEN_BIT, fake)
    assert S8 not in fake.tried and any("not judged, slower than fp32" in why for why in done.why)
    fake = Fake(float_until(100))
    plan(slow_s8, SEVEN_BIT, fake, keep_slower=True)
    assert S8 in fake.tried


def test_a_decline_fails_the_export_only_under_require_variants() -> None:
    declined = [Declined("onnx_int8", "onnx_int8 not written: not accurate enough ...")]
    refuse_declined(declined, required=False)
    refuse_declined([], required=True)
    with pytest.raises(ExportError, match="not accurate enough") as caught:
        refuse_declined(declined, required=True)
    assert "nothing was written" in (caught.value.hint or "")


def test_the_recipe_leaving_the_fewest_qdq_pairs_is_judged_first_unless_slower_than_fp32() -> None:
    """A count of the Q/DQ pairs ONNX Runtime leaves unfused orders the recipes before a noisy timing does: the op
    set it fuses (2 pairs left) is judged before the weight ops alone (34), though timed a little slower."""
    fused = Int8Recipe(ops=("Conv", "Gemm", "Add", "Clip"))
    weights = Int8Recipe()
    fake = Fake(lambda recipe: judged(recipe, True, 0.999))
    plan([Timed(weights, 1.3, 34), Timed(fused, 1.2, 2)], SEVEN_BIT, fake)
    assert fake.tried[0] == fused
    fake = Fake(lambda recipe: judged(recipe, True, 0.999))
    plan([Timed(weights, 1.3, 34), Timed(fused, 0.9, 2)], SEVEN_BIT, fake)  # fewer pairs, but slower than fp32
    assert fake.tried[0] == weights
    fake = Fake(lambda recipe: judged(recipe, True, 0.999))
    plan([Timed(fused, 0.0, 2), Timed(weights, 1.3, 34)], SEVEN_BIT, fake)  # the quantizer failed on it
    assert fake.tried[0] == weights


def test_nodes_are_kept_float_by_what_each_removes_from_the_answer_per_speed_it_costs() -> None:
    """A large convolution kept float costs more speed than an Add: its gain is weighed against its share of the
    integer work; a node whose gain is not positive is never kept float."""
    ranking = Ranking({"big_conv": 0.10, "add": 0.06, "harmless": -0.01, "nothing": 0.0}, "gain", {"big_conv": 0.5})
    assert ranking.nodes == ["add", "big_conv"]  # add: 0.06 / 1; big_conv: 0.10 / (1 + 4 x 0.5)
    assert Ranking({"a": 0.1, "b": 0.2}, "gain").nodes == ["b", "a"]


def test_the_closest_recipe_is_refined_before_the_other_recipes_are_judged() -> None:
    """Keeping the right node float keeps the fast recipe's speed; the weight ops alone or the other activation type
    are judged only when refining it did not pass."""
    fake = Fake(lambda recipe: judged(recipe, recipe.activations is Activations.UINT8 and bool(recipe.excluded), 0.98))
    done = plan(TIMED, SEVEN_BIT, fake)
    assert done.passed and S8 not in fake.tried and done.chosen is not None
    assert done.chosen.recipe == U8.excluding(NODES[:1])
    fake = Fake(lambda recipe: judged(recipe, recipe.activations is Activations.INT8, 0.98))
    done = plan(TIMED, SEVEN_BIT, fake)
    assert done.passed and fake.tried[-1] == S8 and len(fake.tried) <= INT8_TRIALS
    assert [bool(r.excluded) for r in fake.tried[:-1]] == [False, False, *[True] * (len(fake.tried) - 3)]


def test_the_tries_no_other_beats_on_accuracy_and_speed_are_the_choices_shown() -> None:
    def attempt(agreement: float, speed: float) -> Int8Try:
        return Int8Try("r", False, [], 1, 0.9, agreement, judged=24, interval=(0.5, 0.9), speedup=speed)

    tries = [attempt(0.6, 2.0), attempt(0.8, 1.8), attempt(0.7, 1.5), attempt(0.9, 1.1), attempt(0.9, 1.0)]
    front = Int8Details(tries=tries).pareto()
    assert [(t.top1_agreement, t.speedup) for t in front] == [(0.6, 2.0), (0.8, 1.8), (0.9, 1.1)]
    assert front[0].point() == "top-1 0.600 (0.50-0.90), 2.00x fp32"
