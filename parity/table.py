"""A parity verdict as a table for people (the verdict itself, `ParityReport`, is a contract type)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table

from modelship.contract.parity_report import ParityReport


def render_table(reports: Sequence[ParityReport]) -> Table:
    """One row per (candidate, output): the figures a reviewer looks at first, one column per figure any result
    gives (`OutputResult.figures`), "-" where a result has none. The reasons for a failure are long: print
    `report.failures()` beside the table."""
    references = sorted({r.reference for r in reports})
    columns = list(dict.fromkeys(name for r in reports for m in r.outputs for name in m.figures()))
    table = Table(title=f"Parity vs {', '.join(references)}", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("candidate", no_wrap=True)
    table.add_column("output", no_wrap=True)
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True, min_width=len(column))
    table.add_column("result", no_wrap=True, min_width=6)
    for report in reports:
        if report.error:
            table.add_row(report.candidate, "-", *["-"] * len(columns), "[red]ERROR[/]")
            continue
        for m in report.outputs:
            figures = m.figures()
            result = "[green]PASS[/]" if m.passed else "[red]FAIL[/]"
            table.add_row(report.candidate, m.name, *[figures.get(c, "-") for c in columns], result)
    return table
