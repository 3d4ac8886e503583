"""Named, timed export steps: `Steps` times each, tells a `Listener` (the CLI's progress lines) and keeps the
timings for the manifest."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Protocol

from modelship.contract.manifest import StepTiming


class Listener(Protocol):
    """Progress callbacks (the CLI shows them with rich on stderr)."""

    def started(self, step: str) -> None: ...

    def finished(self, step: str, seconds: float, ok: bool) -> None: ...

    def progress(self, step: str, message: str) -> None: ...


class Steps:
    """Times named steps, tells the listener, keeps the list for the manifest."""

    def __init__(self, listener: Listener | None = None) -> None:
        self.timings: list[StepTiming] = []
        self._listener = listener

    @contextlib.contextmanager
    def __call__(self, step: str, artifact: str | None = None) -> Iterator[None]:
        if self._listener:
            self._listener.started(step)
        start = time.perf_counter()
        ok = False
        try:
            yield
            ok = True
        finally:
            seconds = time.perf_counter() - start
            self.timings.append(StepTiming(step, seconds, artifact, ok))
            if self._listener:
                self._listener.finished(step, seconds, ok)

    def progress(self, step: str, message: str) -> None:
        """Tell the listener how far a long running `step` has got."""
        if self._listener:
            self._listener.progress(step, message)

    def seconds(self, artifact: str) -> dict[str, float]:
        """Per-step seconds of one artifact, keyed by the step's first word (script, export, convert, verify)."""
        out: dict[str, float] = {}
        for t in self.timings:
            if t.artifact == artifact:
                key = t.step.split()[0]
                out[key] = round(out.get(key, 0.0) + t.seconds, 4)
        return out
