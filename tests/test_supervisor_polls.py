"""The supervisor's judgement of vanished stubs, on a scripted server: a stub one poll misses (the process table read
while the server forks and reaps under load) is not a crash when the next poll lists it again, and a stub that
really went while its version stays READY still is, GRACE_S later."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from modelship.serve import supervisor as supervision
from modelship.serve.model_info import ModelState
from modelship.serve.stubs import Stub

STUB = Stub(101, "tiny_onnx_0_0", "2")


@dataclass
class ScriptedServer:
    """`polls`: what each call of stubs() answers, in turn; the model's version 2 is READY throughout."""

    polls: list[dict[int, Stub]]
    calls: int = field(default=0)

    def stubs(self) -> dict[int, Stub]:
        answer = self.polls[min(self.calls, len(self.polls) - 1)]
        self.calls += 1
        return answer

    @contextlib.contextmanager
    def client(self) -> Iterator[ScriptedServer]:
        yield self

    def repository_index(self) -> list[ModelState]:
        return [ModelState("tiny_onnx", "2", "READY")]


@pytest.mark.parametrize(
    ("polls", "crashed"), [([{101: STUB}, {}, {101: STUB}], []), ([{101: STUB}, {}, {}], ["tiny_onnx"])]
)
def test_a_stub_one_poll_missed_is_no_crash(monkeypatch, polls: list, crashed: list) -> None:
    clock = iter(range(0, 100, 3))  # each poll 3 s after the one before: the third is past GRACE_S (5 s)
    monkeypatch.setattr(supervision.time, "monotonic", lambda: float(next(clock)))
    lines: list[str] = []
    watcher = supervision.Supervisor(ScriptedServer(polls), lines.append)
    watcher._watch(watcher.server.stubs())
    found = [watcher._look() for _ in range(3)]
    assert [model for models in found for model in models] == crashed, lines
    assert ("died" in " ".join(lines)) is bool(crashed), lines
