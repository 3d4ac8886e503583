"""A parity verdict as a table for people (the verdict itself, `ParityReport`, is a contract type)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table

from modelship.contract.parity_report import ParityReport


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
