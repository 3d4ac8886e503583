"""How sure a verdict on n held-back inputs is (contract.confidence): Wilson's interval, the inputs it takes to tell a
bar from a value 0.05 below it, and the one line a verdict on fewer says."""

from __future__ import annotations

import pytest

from modelship.contract.confidence import Agreement, inputs_to_resolve, wilson


def test_wilson_matches_the_textbook_figures() -> None:
    assert wilson(22, 24) == pytest.approx((0.7415, 0.9768), abs=1e-4)  # 0.917 on 24 photos
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(0, 0) == (0.0, 1.0)


def test_the_inputs_needed_grow_as_the_bar_leaves_the_edges() -> None:
    assert inputs_to_resolve(0.9) == 184
    assert inputs_to_resolve(0.98) < inputs_to_resolve(0.9) < inputs_to_resolve(0.8)
    low, _ = wilson(round(0.9 * 184), 184)
    assert low >= 0.85 > wilson(round(0.9 * 183), 183)[0]


def test_a_verdict_whose_interval_holds_the_bar_and_a_value_below_says_so_in_one_line_and_no_other() -> None:
    line = Agreement(22 / 24, 24, 0.9).warning("held-back inputs", "--holdout DIR")
    assert line == (
        "24 held-back inputs: 0.917 (0.74-0.98); too few to tell 0.9 from 0.85: give at least 184 held-back inputs "
        "(--holdout DIR)"
    )
    assert Agreement(0.95, 200, 0.9).warning("held-back inputs", "") is None
    assert Agreement(1.0, 30, 0.9).warning("held-back inputs", "") is None  # 0.89-1.00: above 0.85 all the same
    assert Agreement(0.4, 24, 0.9).warning("held-back inputs", "") is None  # 0.23-0.59: below the bar all the same
