"""A run against a committed baseline: the rule that marks a row moved (its own spread, with a floor), which way is
worse, and what is reported besides (rows too noisy to judge, missing and new rows, another machine, mode)."""

from __future__ import annotations

import dataclasses

import pytest

from modelship.bench.baseline import Baseline, BaselineRow, Machine
from modelship.bench.compare import FLOOR, NOISY, allowed, compare, compare_all
from modelship.bench.report import MachineInfo, Report, Row

MACHINE = Machine("Test CPU @ 2.0GHz", 2, "3.11.7", {"onnxruntime-gpu": "1.31.1", "torch": "2.14.1"})


def row(case: str, ratio: float, spread: float = 0.04, better: str = "higher", suite: str = "serving") -> BaselineRow:
    return BaselineRow(suite, case, ratio, spread, 8, ratio * 0.9, ratio * 1.1, better, "served / in-process",
                       100.0 * ratio, 100.0, "inf/s")  # fmt: skip


def baseline(*rows: BaselineRow, suites: tuple[str, ...] = ("serving",), quick: bool = True) -> Baseline:
    return Baseline(suites, quick, "2026-12-05T10:00:00", 240.0, MACHINE, rows)


BASE = baseline(
    row("small onnx b1 c1 grpc", 0.45),
    row("small onnx b8 c1 grpc", 0.62),
    row("small onnx b1 c1 grpc vs fastapi peer", 1.15),
    row("small onnx b1 c1 in-process baseline", 0.98, better="one"),
)


def edited(base: Baseline, case: str, factor: float) -> Baseline:
    rows = tuple(dataclasses.replace(r, ratio=r.ratio * factor) if r.case == case else r for r in base.rows)
    return dataclasses.replace(base, rows=rows)


def test_an_unchanged_run_passes() -> None:
    result = compare(BASE, BASE)
    assert result.ok and [c.status for c in result.changes] == ["same"] * 4 and result.notes == ()
    assert result.summary() == "4 rows compared: 4 same"


def test_a_baseline_row_edited_30_percent_better_fails_and_names_the_row() -> None:
    result = compare(edited(BASE, "small onnx b8 c1 grpc", 1.3), BASE)
    assert not result.ok
    (regression,) = result.regressions
    assert regression.name == "serving/small onnx b8 c1 grpc"
    assert regression.describe() == "serving/small onnx b8 c1 grpc: 0.806 -> 0.62 (-23%, allowed -18%/+23%)"
    assert result.to_dict()["regressions"] == ["serving/small onnx b8 c1 grpc"]


def test_a_row_too_noisy_to_judge_30_percent_is_noisy_not_same_and_better_is_not_a_regression() -> None:
    noisy = baseline(row("small onnx b1 c1 grpc", 0.45, spread=0.06))
    assert allowed(0.06, 0.06) > NOISY
    (change,) = compare(edited(noisy, "small onnx b1 c1 grpc", 1.3), noisy).changes
    assert change.status == "noisy" and compare(noisy, noisy).ok
    tight = baseline(row("small onnx b1 c1 grpc", 0.45, spread=0.03))
    improved = compare(tight, edited(tight, "small onnx b1 c1 grpc", 1.3))
    assert improved.ok and [c.status for c in improved.changes] == ["better"]


def test_a_row_within_its_spread_passes_and_a_tight_row_has_the_floor() -> None:
    assert allowed(0.0, 0.0) == FLOOR
    assert allowed(0.04, 0.04) == pytest.approx(4 * 0.0566, abs=1e-3)  # K combined standard errors
    wide = baseline(row("small onnx b1 c1 grpc", 0.45, spread=0.04))
    assert compare(wide, edited(wide, "small onnx b1 c1 grpc", 0.84)).ok  # -16%, allowed -18%/+23%
    tight = baseline(row("small onnx b1 c1 grpc", 0.45, spread=0.0))
    (change,) = compare(tight, edited(tight, "small onnx b1 c1 grpc", 0.84)).changes  # -16%, allowed -13%/+15%
    assert change.status == "worse" and change.allowed == FLOOR


def test_which_way_is_worse_follows_the_row() -> None:
    rows = (row("export end to end", 1.0, 0.0, "lower", "export"), row("check", 1.0, 0.0, "one", "export"))
    base = baseline(*rows, suites=("export",))
    slower = compare(base, edited(base, "export end to end", 1.3))
    assert [c.status for c in slower.changes] == ["worse", "same"]
    assert compare(base, edited(base, "export end to end", 0.7)).having("better")
    off = compare(base, edited(base, "check", 0.7))
    assert [c.status for c in off.changes] == ["same", "worse"]  # a check moving away from 1
    back = compare(edited(base, "check", 0.7), base)
    assert [c.status for c in back.changes] == ["same", "better"]


def test_a_missing_row_and_a_new_row_are_reported_not_failed() -> None:
    current = dataclasses.replace(BASE, rows=(*BASE.rows[1:], row("small onnx b1 c4 grpc", 0.7)))
    result = compare(BASE, current)
    assert result.ok
    (missing,) = result.having("missing")
    assert missing.name == "serving/small onnx b1 c1 grpc" and missing.after is None
    assert missing.describe() == "serving/small onnx b1 c1 grpc: missing (baseline 0.45)"
    (new,) = result.having("new")
    assert new.case == "small onnx b1 c4 grpc" and new.before is None
    assert result.summary() == "5 rows compared: 1 missing, 1 new, 3 same"


def test_other_machines_modes_and_suites_not_run_are_noted() -> None:
    other = dataclasses.replace(MACHINE, cores=16, packages={**MACHINE.packages, "torch": "2.15.0"})
    current = dataclasses.replace(BASE, machine=other, quick=False)
    notes = compare(BASE, current).notes
    assert notes[0] == "the baseline is --quick, this run full: different plans"
    assert notes[1] == "another machine or packages than the baseline's: cores 2 -> 16; torch 2.14.1 -> 2.15.0"
    export = baseline(row("small end to end", 1.0, 0.0, "lower", "export"), suites=("export",))
    result = compare_all([BASE, export], dataclasses.replace(BASE, suites=("serving", "transport")))
    assert [c.suite for c in result.changes] == ["serving"] * 4
    assert result.notes == (
        "suite export not run: its baseline rows are not compared",
        "suite transport has no baseline",
    )


def test_a_baseline_keeps_each_rows_ratio_and_spread_and_reads_back() -> None:
    point = {"ratios": [0.4, 0.45, 0.5], "relative_error": 0.0627}
    rows = [
        Row("serving", "small onnx b1 c1 grpc", 0.45, "served / in-process", 180.123, 400.456, "inf/s",
            data=point, flags=["unstable: after 3 pairs the median is known to ±6.27% (target ±4.0%)"]),
        Row("serving", "small onnx pytriton peer", None, "modelship / peer", None, None, "", "not installed"),
        Row("export", "small end to end", 0.97, "tool / bare library calls", 9.7, 10.0, "s", better="lower"),
        Row("export", "small load", 9.3, "tool / bare library calls", 0.64, 0.07, "s", better=None),
    ]  # fmt: skip
    machine = MachineInfo(2, "Test CPU", None, "Linux-6.1-x86_64", "x86_64", "3.11.7", {"torch": "2.14.1"})
    report = Report(rows, True, "2026-12-05T10:00:00", 61.04, machine, suites=["serving", "export"])
    made = Baseline.from_report(report)
    assert made.suites == ("serving", "export") and made.machine == Machine(
        "Test CPU", 2, "3.11.7", {"torch": "2.14.1"}
    )
    served, exported = made.rows  # the row without a ratio and the detail not judged are left out
    assert (served.ratio, served.spread, served.pairs, served.lo, served.hi) == (0.45, 0.0627, 3, 0.4, 0.5)
    assert served.measured == 180.1 and served.flags == ("unstable",)
    assert (exported.spread, exported.pairs, exported.better) == (0.0, 1, "lower")
    assert Baseline.from_dict(made.to_dict()) == made
    assert made.only("export").rows == (exported,)
    with pytest.raises(ValueError, match="schema"):
        Baseline.from_dict({**made.to_dict(), "schema": 0})
    with pytest.raises(ValueError, match="appear twice: serving/small onnx b1 c1 grpc"):
        dataclasses.replace(made, rows=(served, served))
