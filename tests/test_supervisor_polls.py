"""The supervisor's judgement of vanished stubs, on a scripted server: a stub one poll misses (the process table read
while the server forks and reaps under load) is not a crash when the next poll lists it again, and a stub that
really went while its version stays READY still is, GRACE_S later, unless a load with another config replaced it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

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

    def model_config(self, name: str) -> dict:
        return {"instance_group": [{"count": 1}]}


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


def test_a_load_with_another_config_that_replaces_the_stub_is_no_crash(monkeypatch) -> None:
    """`modelship tune` loads a config over the served one: Triton starts the new stub, then ends the old; as many
    stubs as the config asks for still serve the version, so nothing is reloaded."""
    clock = iter(range(0, 100, 3))
    monkeypatch.setattr(supervision.time, "monotonic", lambda: float(next(clock)))
    replacement = replace(STUB, pid=102)
    polls = [{101: STUB}, {101: STUB, 102: replacement}, {102: replacement}, {102: replacement}, {102: replacement}]
    lines: list[str] = []
    watcher = supervision.Supervisor(ScriptedServer(polls), lines.append)
    watcher._watch(watcher.server.stubs())
    assert [model for _ in range(4) for model in watcher._look()] == [], lines
    assert "died" not in " ".join(lines) and supervision.REPLACED in " ".join(lines), lines
