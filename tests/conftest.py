"""Shared test setup: deterministic, sized for a 2-core machine, and figures worth reading in the CI log."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")

FIGURES: list[str] = []


@pytest.fixture(scope="session")
def report_figure() -> Callable[[str], None]:
    """Record a measured figure (an error bound, a timing) to print in the test run's summary."""
    return FIGURES.append


@pytest.fixture(scope="session")
def detector_exports(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, dict]]:
    """A detector checkpoint exported once per session by `tests.test_detection.export_detector` (every module
    judging the same export shares it: each takes about a minute on two cores)."""
    from tests.test_detection import export_detector

    done: dict[str, tuple[Path, dict]] = {}

    def get(arch: str) -> tuple[Path, dict]:
        if arch not in done:
            done[arch] = export_detector(tmp_path_factory.mktemp("detection"), arch)
        return done[arch]

    return get


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("measured figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
