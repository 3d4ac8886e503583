"""A parity verdict for one candidate against one reference: JSON for machines, a table and a line for people."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.table import Table

from export.parity.metrics import OutputMetrics


@dataclass
class ParityReport:
    """Outputs are aggregated over every input set (worst case); `per_batch` keeps each set's own figures.
    `error` is set when the candidate could not produce outputs at all (it crashed or raised)."""

    reference: str
    candidate: str
    batch_sizes: list[int]
    outputs: list[OutputMetrics]
    passed: bool
    seconds: float
    tolerance: dict[str, Any] = field(default_factory=dict)
    per_batch: list[dict[str, Any]] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "candidate": self.candidate,
            "passed": self.passed,
            "error": self.error,
            "batch_sizes": list(self.batch_sizes),
            "seconds": round(self.seconds, 4),
            "tolerance": self.tolerance,
            "outputs": [m.to_dict() for m in self.outputs],
            "per_batch": self.per_batch,
        }

    def summary_line(self) -> str:
        """e.g. `onnx_fp16 vs eager: PASS  output max_abs 3.1e-02 cos 0.99991 top1 1.000  (batches 1,8; 0.4 s)`."""
        verdict = "PASS" if self.passed else "FAIL"
        where = f"(batches {','.join(map(str, self.batch_sizes))}; {self.seconds:.1f} s)"
        if self.error:
            return f"{self.candidate} vs {self.reference}: {verdict}  {self.error}  {where}"
        parts = []
        for m in self.outputs:
            text = f"{m.name} max_abs {m.max_abs:.2g} cos {m.cosine:.5f}"
            if m.top1_agreement is not None:
                text += f" top1 {m.top1_agreement:.3f}"
            parts.append(text)
        return f"{self.candidate} vs {self.reference}: {verdict}  {'; '.join(parts)}  {where}"

    def first_failed_set(self, usable: Callable[[int], bool] = lambda _index: True) -> int:
        """The index of the first input set (of those `usable`) this candidate failed on; 0 when none is known."""
        rows = self.per_batch or []
        return next((i for i, row in enumerate(rows) if not row["passed"] and usable(i)), 0)

    def failures(self) -> list[str]:
        """Every reason for failing, prefixed by the output it concerns."""
        reasons = [self.error] if self.error else []
        return reasons + [f"{m.name}: {reason}" for m in self.outputs for reason in m.failures]


def render_table(reports: Sequence[ParityReport]) -> Table:
    """One row per (candidate, output): the figures a reviewer looks at first. The reasons for a failure are long:
    print `report.failures()` beside the table."""
    references = sorted({r.reference for r in reports})
    table = Table(title=f"Parity vs {', '.join(references)}", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("candidate", no_wrap=True)
    table.add_column("output", no_wrap=True)
    for column in ("max abs", "p99 abs", "cosine", "top-1", "req. atol"):
        table.add_column(column, justify="right", no_wrap=True, min_width=len(column))
    table.add_column("result", no_wrap=True, min_width=6)
    for report in reports:
        if report.error:
            table.add_row(report.candidate, "-", *["-"] * 5, "[red]ERROR[/]")
            continue
        for m in report.outputs:
            top1 = "-" if m.top1_agreement is None else f"{m.top1_agreement:.3f}"
            result = "[green]PASS[/]" if m.passed else "[red]FAIL[/]"
            row = (f"{m.max_abs:.1e}", f"{m.p99_abs:.1e}", f"{m.cosine:.6f}", top1, f"{m.required_atol:.1e}")
            table.add_row(report.candidate, m.name, *row, result)
    return table
