"""Shared test setup: deterministic, sized for a 2-core machine, and figures worth reading in the CI log."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")

FIGURES: list[str] = []


@pytest.fixture(scope="session")
def report_figure() -> Callable[[str], None]:
    """Record a measured figure (an error bound, a timing) to print in the test run's summary."""
    return FIGURES.append


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("measured figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
