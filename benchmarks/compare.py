"""A new run against a baseline, row by row (pure functions, no I/O).

A row moved when its new ratio differs from the baseline's by more than the row's own noise allows:

    allowed = max(FLOOR, K * sqrt(spread_baseline² + spread_new²))
    moved   = new / baseline > 1 + allowed  or  new / baseline < 1 / (1 + allowed)

`spread` is the relative standard error of the row's median, as the bench measured it in each run (0 for a row
measured once). K = 4 standard errors of the difference: between runs a row moves more than its within-run error
says (a fresh server process has its own state): over 250 row pairs of six pairs of full runs (2026-12-01 to
12-04) the move reached 3.7 standard errors at the 99th percentile and 4.2 at most, and three `--quick` runs under
load reached 3.0. The FLOOR keeps a tight row from tripping on that state (two quick runs of 2026-12-04 put small
b1 c1 gRPC 17% apart with ±3% each). A moved row is better or worse by the row's direction (`Row.better`); worse is
a regression. A row that did not move but whose spread allows more than NOISY is `noisy`: not judged (rerun on an
idle machine). A baseline row the new run lacks is `missing`, a new row without a baseline is `new`. Only `worse`
fails a comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.console import JustifyMethod
from rich.table import Table

from modelship.bench.baseline import Baseline, BaselineRow
from modelship.contract.json_object import JsonObject

K = 4.0
FLOOR = 0.15
NOISY = 0.30
STATUSES = ("worse", "better", "noisy", "missing", "new", "same")


def allowed(spread_before: float, spread_after: float) -> float:
    """The relative move a row may make without counting: K combined standard errors, at least FLOOR."""
    return max(FLOOR, K * math.hypot(spread_before, spread_after))


@dataclass(frozen=True)
class RowChange:
    """One row's verdict: `status` (STATUSES), its ratio in the baseline and now, and the move it was allowed."""

    suite: str
    case: str
    status: str
    before: float | None
    after: float | None
    allowed: float | None = None

    @property
    def name(self) -> str:
        return f"{self.suite}/{self.case}"

    @property
    def change(self) -> float | None:
        """now / baseline, or None when either is missing."""
        if self.before is None or self.after is None:
            return None
        return self.after / self.before

    def describe(self) -> str:
        if self.before is None:
            return f"{self.name}: new row, {self.after:.3g}"
        if self.after is None:
            return f"{self.name}: missing (baseline {self.before:.3g})"
        move = self.after / self.before - 1
        return f"{self.name}: {self.before:.3g} -> {self.after:.3g} ({move:+.0%}, allowed {self.bounds()})"

    def bounds(self) -> str:
        """The moves allowed, down and up: "-19%/+23%" for allowed = 23% (a factor of 1.23 either way)."""
        if self.allowed is None:
            return "-"
        return f"-{1 - 1 / (1 + self.allowed):.0%}/+{self.allowed:.0%}"

    def to_dict(self) -> JsonObject:
        return {
            "suite": self.suite,
            "case": self.case,
            "status": self.status,
            "baseline": self.before,
            "now": self.after,
            "change": None if self.change is None else round(self.change, 4),
            "allowed": self.allowed,
        }


def judge(before: BaselineRow, after: BaselineRow) -> RowChange:
    """The verdict on one row present in both runs (the rule in this module's docstring)."""
    tolerance = round(allowed(before.spread, after.spread), 4)
    change = after.ratio / before.ratio
    status = "noisy" if tolerance > NOISY else "same"
    if change > 1 + tolerance or change < 1 / (1 + tolerance):
        if before.better == "higher":
            improved = change > 1
        elif before.better == "lower":
            improved = change < 1
        else:  # "one": better is nearer 1
            improved = abs(math.log(after.ratio)) < abs(math.log(before.ratio))
        status = "better" if improved else "worse"
    return RowChange(before.suite, before.case, status, before.ratio, after.ratio, tolerance)


@dataclass(frozen=True)
class Comparison:
    """Every row's verdict and what makes the two runs hard to compare (`notes`: mode, machine, suites not run)."""

    changes: tuple[RowChange, ...]
    notes: tuple[str, ...] = ()

    def having(self, status: str) -> list[RowChange]:
        return [change for change in self.changes if change.status == status]

    @property
    def regressions(self) -> list[RowChange]:
        return self.having("worse")

    @property
    def ok(self) -> bool:
        return not self.regressions

    def summary(self) -> str:
        counts = ", ".join(f"{len(self.having(s))} {s}" for s in STATUSES if self.having(s))
        return f"{len(self.changes)} row{'s' * (len(self.changes) != 1)} compared: {counts or 'none'}"

    def to_dict(self) -> JsonObject:
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "regressions": [change.name for change in self.regressions],
            "notes": list(self.notes),
            "rows": [change.to_dict() for change in self.changes],
        }


def compare(baseline: Baseline, current: Baseline) -> Comparison:
    """`current` (a new run, as a Baseline) against `baseline`, for the suites both cover."""
    notes = []
    if baseline.quick != current.quick:
        notes.append(f"the baseline is {_mode(baseline)}, this run {_mode(current)}: different plans")
    differences = baseline.machine.differences(current.machine)
    if differences:
        notes.append("another machine or packages than the baseline's: " + "; ".join(differences))
    notes += [f"suite {suite} not run: its baseline rows are not compared" for suite in baseline.suites
              if suite not in current.suites]  # fmt: skip
    now = {row.key: row for row in current.rows if row.suite in baseline.suites}
    changes = []
    for before in baseline.rows:
        if before.suite not in current.suites:
            continue
        after = now.pop(before.key, None)
        if after is None:
            changes.append(RowChange(before.suite, before.case, "missing", before.ratio, None))
        else:
            changes.append(judge(before, after))
    changes += [RowChange(row.suite, row.case, "new", None, row.ratio) for row in now.values()]
    return Comparison(tuple(changes), tuple(notes))


def compare_all(baselines: list[Baseline], current: Baseline) -> Comparison:
    """`current` against several baselines (one per suite, usually) as one comparison; a suite that ran without a
    baseline is noted."""
    parts = [compare(baseline, current) for baseline in baselines]
    covered = {suite for baseline in baselines for suite in baseline.suites}
    notes = [note for part in parts for note in part.notes]
    notes += [f"suite {suite} has no baseline" for suite in current.suites if suite not in covered]
    return Comparison(tuple(c for part in parts for c in part.changes), tuple(dict.fromkeys(notes)))


_STYLE = {
    "worse": "bold red",
    "better": "bold green",
    "noisy": "magenta",
    "missing": "yellow",
    "new": "cyan",
    "same": "dim",
}


def render_comparison(comparison: Comparison) -> Table:
    """The comparison as a table: each row's verdict, its ratio in the baseline and now, the move it was allowed."""
    table = Table(title="against the baseline", caption=comparison.summary())
    columns: tuple[tuple[str, JustifyMethod], ...] = (("", "left"), ("suite", "left"), ("case", "left"),
        ("baseline", "right"), ("now", "right"), ("change", "right"), ("allowed", "right"))  # fmt: skip
    for name, justify in columns:
        table.add_column(name, justify=justify, overflow="fold")
    for change in comparison.changes:
        table.add_row(
            f"[{_STYLE[change.status]}]{change.status}[/]",
            change.suite,
            change.case,
            "-" if change.before is None else f"{change.before:.2f}",
            "-" if change.after is None else f"{change.after:.2f}",
            "-" if change.change is None else f"{change.change - 1:+.0%}",
            change.bounds(),
        )
    return table


def _mode(baseline: Baseline) -> str:
    return "--quick" if baseline.quick else "full"
