"""Keep a local Triton server serving: restart it when it dies, reload a model whose backend stub died.

Two faults seen with Triton 2.51 (docs/serving.md has the measurements):
- a request can abort tritonserver itself (a JSON-encoded tensor declaring a huge shape: std::bad_alloc in the
  HTTP frontend). The supervisor restarts it on the same ports, with back-off between attempts;
- a Python-backend stub that dies is never restarted by Triton, and its model keeps answering READY while every
  request fails. The supervisor notices the stub is gone and reloads that model (unload, so /ready answers false,
  then load with the config it was served with, which starts a new stub) through the repository API; without that
  API it restarts the server.

Stubs also end on purpose: Triton stops the stub of a version it unloads or replaces (a rollout loads version N
beside the old one, then unloads the old). A vanished stub is a crash only while Triton's repository index still
lists its (model, version) READY, and still does GRACE_S later (a version being unloaded stays READY for a moment
after its stub has ended: up to ~3 s under load was seen, and a supervisor that reloaded it then undid a rollback's
restore), unless as many stubs as the model's config now asks for still serve it (a load with another config,
as `modelship tune` does, replaces every stub and may change their number); stubs are mapped to (model, version)
from their command line (Triton's instance name and the version folder), so local folders and object storage (a
temporary copy per model) alike.

What it decides is in its log: one line when it starts watching a stub ("backend stub PID (INSTANCE, version V):
watching") and one when that stub is gone ("... ended: WHY" or "... died: WHY"), so a reader (an operator, a test)
can wait for its verdict on a stub instead of guessing how long the supervisor takes to look.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from modelship.contract.errors import ClientError, ServeError
from modelship.serve.model_info import instance_count
from modelship.serve.server import TritonServer
from modelship.serve.stubs import Stub

BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
STABLE_S = 60.0  # up this long after a restart: the next failure starts the back-off again
POLL_S = 0.5
GRACE_S = 5.0  # a vanished stub's version still READY this long after: crashed (Triton's own unloads end sooner)
REPLACED = "ended: its model was reloaded (as many stubs as its config asks for serve it)"


@dataclass
class Suspect:
    """A (model, version) that lost stubs while Triton listed it READY: since when, and the stubs it lost."""

    since: float
    stubs: list[Stub] = field(default_factory=list)


@dataclass
class Supervisor:
    """Watches `server` from `run(stop)` until `stop` is set; `log` gets one line per event."""

    server: TritonServer
    log: Callable[[str], None]
    backoff_s: tuple[float, ...] = BACKOFF_S
    restarts: int = 0
    reloads: int = 0
    events: list[dict] = field(default_factory=list)
    _stubs: Mapping[int, Stub] = field(default_factory=dict)
    _suspects: dict[tuple[str, str], Suspect] = field(default_factory=dict)  # (model, version) whose stub went
    _failures: int = 0
    _up_since: float = field(default_factory=time.monotonic)

    def run(self, stop: threading.Event) -> None:
        self._watch(self.server.stubs())
        while not stop.wait(POLL_S):
            if not self.server.running:
                self._restart(stop, f"tritonserver exited ({self._exit_reason()})")
                continue
            try:
                crashed = self._look()
            except ClientError:  # the server itself is going: the next poll sees it
                continue
            if crashed:
                self._recover(stop, crashed)

    def _look(self) -> list[str]:
        """Judge the stubs gone since the last poll, watch the new ones; the models whose stubs crashed."""
        stubs = self.server.stubs()
        gone = [stub for pid, stub in self._stubs.items() if pid not in stubs]
        crashed = self._crashed(gone, stubs) if gone or self._suspects else []
        self._watch(stubs)
        return crashed

    def _crashed(self, gone: list[Stub], alive: Mapping[int, Stub]) -> list[str]:
        """The models among the vanished stubs' that crashed: Triton still lists their (model, version) READY,
        GRACE_S after fewer stubs served it than before. A stub whose version was unloaded, replaced or was being
        loaded ended because Triton ended it (its version leaves READY), and so did a model-level stub (a load starts
        and ends it). Every vanished stub gets one log line once judged; ClientError when the index is unreadable."""
        with self.server.client() as client:
            index = client.repository_index()
        names = {entry.name for entry in index}
        ready = {(entry.name, entry.version) for entry in index if entry.ready}
        for key, suspect in list(self._suspects.items()):  # listed again: a poll that missed it (it never went)
            suspect.stubs = [stub for stub in suspect.stubs if stub.pid not in alive]
            if not suspect.stubs:
                del self._suspects[key]
        before = Counter((stub.model(names), stub.version) for stub in self._stubs.values())
        now = Counter((stub.model(names), stub.version) for stub in alive.values())
        for stub in gone:
            model, version = stub.model(names), stub.version
            if not model:
                self._closed(stub, "ended: a model-level stub (a load starts and ends it)")
            elif now[model, version] < before[model, version]:
                self._suspects.setdefault((model, version), Suspect(time.monotonic())).stubs.append(stub)
            else:
                self._closed(stub, "ended: another stub serves its version")
        for key in [key for key in self._suspects if key not in ready]:
            for stub in self._suspects.pop(key).stubs:
                self._closed(stub, "ended: Triton unloaded its version")
        due = [key for key, suspect in self._suspects.items() if time.monotonic() - suspect.since >= GRACE_S]
        crashed = set()
        for model, version in due:
            served = now[model, version] >= self._instances(model)
            for stub in self._suspects.pop((model, version)).stubs:
                self._closed(stub, REPLACED if served else f"died: its version still READY {GRACE_S:.0f} s later")
            if not served:
                crashed.add(model)
        return sorted(crashed)

    def _instances(self, model: str) -> int:
        """The stubs `model`'s config asks for now (a load with another config, `modelship tune`'s, changes it)."""
        with self.server.client() as client:
            return instance_count(client.model_config(model))

    def _watch(self, stubs: Mapping[int, Stub], ended: str = "") -> None:
        """Watch `stubs` from now on (a line for each new one); `ended`: why those no longer there ended, when the
        caller knows it (a reload, a restart; a poll has judged them itself)."""
        for pid, stub in self._stubs.items():
            if ended and pid not in stubs:
                self._closed(stub, f"ended {ended}")
        for pid, stub in stubs.items():
            if pid not in self._stubs:
                self.log(f"{_describe(stub)}: watching")
        self._stubs = stubs

    def _closed(self, stub: Stub, verdict: str) -> None:
        self.log(f"{_describe(stub)} {verdict}")

    def _exit_reason(self) -> str:
        code = self.server.process.poll() if self.server.process is not None else None
        text = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        tail = [line for line in self.server.log_tail(20).splitlines() if line.strip()]
        return f"{text}; last log line: {tail[-1].strip()[:200]}" if tail else text

    def _recover(self, stop: threading.Event, models: list[str]) -> None:
        if not self.server.repository_api:
            self._restart(stop, f"the backend stub of {', '.join(models)} died")
            return
        for model in models:
            began = time.perf_counter()
            try:
                with self.server.client() as client:
                    client.reload(model, client.model_config(model))  # as loaded (a rollout's versions)
            except ClientError as exc:
                self._restart(stop, f"reloading {model} after its backend stub died failed: {exc.message}")
                return
            seconds = time.perf_counter() - began
            self.reloads += 1
            self._event("reload", f"the backend stub of {model} died; reloaded it in {seconds:.1f} s", seconds)
        self._watch(self.server.stubs(), ended=f"with the reload of {', '.join(models)}")

    def _restart(self, stop: threading.Event, why: str) -> None:
        if time.monotonic() - self._up_since > STABLE_S:
            self._failures = 0
        delay = self.backoff_s[min(self._failures, len(self.backoff_s) - 1)]
        self._failures += 1
        self.log(f"{why}; restarting in {delay:.0f} s (restart {self.restarts + 1})")
        if stop.wait(delay):
            return
        began = time.perf_counter()
        try:
            self.server.restart()
        except ServeError as exc:
            self.log(f"restart failed: {exc.message}")
            return
        seconds = time.perf_counter() - began
        self.restarts += 1
        self._up_since = time.monotonic()
        for stub in (stub for suspect in self._suspects.values() for stub in suspect.stubs):
            self._closed(stub, "ended with tritonserver")
        self._suspects.clear()
        self._watch(self.server.stubs(), ended="with tritonserver")
        self._event("restart", f"tritonserver ready again in {seconds:.1f} s on the same ports", seconds)

    def _event(self, kind: str, message: str, seconds: float) -> None:
        self.events.append({"event": kind, "seconds": round(seconds, 2), "message": message})
        self.log(message)


def _describe(stub: Stub) -> str:
    return f"backend stub {stub.pid} ({stub.instance}, version {stub.version})"
