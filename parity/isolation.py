"""Run a runner in a child process, so a native crash (a segfault in ONNX Runtime) becomes a ParityError.

The child is a fresh interpreter (`python -c ...`, so the caller's script is never re-run, and
no forked copy of a torch-laden parent). It receives the parent's `sys.path` and a picklable factory, builds its
runner, and answers pickled `run` requests on stdin/stdout until stdin closes (a later `start` replaces the runner,
so one `Worker` serves several checks); its own prints go to stderr. If it dies, the parent raises
`ParityError("<what> crashed (signal 11) on <target>")` instead of going down with it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import IO, Any

from modelship.contract.errors import ModelshipError, ParityError
from modelship.contract.tensors import Tensors
from modelship.parity.runner_protocol import BaseRunner

CHILD_MAIN = f"from {__name__} import serve; serve()"


class Worker:
    """A child interpreter answering pickled requests. It starts at construction and imports `preload` (module
    names from this code, never from data) straight away, so that cost overlaps the caller's own work; it serves
    one runner after another until closed."""

    def __init__(self, preload: Sequence[str] = ()) -> None:
        code = "".join(f"import {module}; " for module in preload) + CHILD_MAIN
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=os.environ.copy()
        )
        weakref.finalize(self, _stop, self.process)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def exchange(self, message: tuple[str, Any]) -> tuple[str, Any]:
        """Send one request, return (status, payload); EOFError or a broken pipe when the child died."""
        assert self.process.stdin is not None and self.process.stdout is not None
        _send(self.process.stdin, message)
        return pickle.load(self.process.stdout)

    def close(self) -> None:
        """Stop the child (idempotent)."""
        _stop(self.process)


class IsolatedRunner(BaseRunner):
    """A Runner whose work happens in a child process built by `factory()`: in `worker` when one is given (the
    caller keeps it and closes it), else in a child of its own started on first use."""

    def __init__(
        self,
        factory: Callable[[], Any],
        name: str,
        *,
        what: str,
        target: str,
        hint: str | None = None,
        worker: Worker | None = None,
    ) -> None:
        self.name = name
        self._factory = factory
        self._what = what
        self._target = target
        self._hint = hint
        self._worker = worker
        self._owned = worker is None
        self._started = False

    def run(self, inputs: Tensors) -> Tensors:
        return self._exchange(self._start(), ("run", inputs))

    def close(self) -> None:
        """Stop the child, unless it is the caller's worker (idempotent)."""
        if self._worker is not None and self._owned:
            self._worker.close()
            self._worker = None
        self._started = False

    def _start(self) -> Worker:
        if self._worker is None or not self._worker.alive:
            self._worker, self._owned, self._started = Worker(), True, False
        if not self._started:
            # the factory travels pickled inside the message, so the child can set sys.path before unpickling it
            self._exchange(self._worker, ("start", (list(sys.path), pickle.dumps(self._factory))))
            self._started = True
        return self._worker

    def _exchange(self, worker: Worker, message: tuple[str, Any]) -> Any:
        try:
            status, payload = worker.exchange(message)
        except (EOFError, BrokenPipeError, ConnectionResetError, pickle.UnpicklingError):
            raise self._crashed(worker.process) from None
        if status == "error":
            raise ParityError(payload)  # the child's own message, which names the runner and the file
        return payload

    def _crashed(self, process: subprocess.Popen[bytes]) -> ParityError:
        self._started = False
        try:
            code = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        if code < 0:
            reason, details = f"signal {-code}", {"signal": -code, "signal_name": _signal_name(-code)}
        else:
            reason, details = f"exit code {code}", {"exit_code": code}
        return ParityError(f"{self._what} crashed ({reason}) on {self._target}", hint=self._hint, details=details)


def _send(stream: IO[bytes], message: tuple[str, Any]) -> None:
    pickle.dump(message, stream, protocol=pickle.HIGHEST_PROTOCOL)
    stream.flush()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None and not process.stdin.closed:
        with contextlib.suppress(OSError):
            process.stdin.close()  # end of requests: the child exits
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def serve() -> None:
    """The child's loop: stdout is kept for replies, everything printed goes to stderr."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer
    runner = None
    while True:
        try:
            message, payload = pickle.load(requests)
        except EOFError:
            return
        try:
            if message == "start":
                sys.path[:] = payload[0]
                runner = pickle.loads(payload[1])()
                _send(replies, ("ok", None))
            else:
                assert runner is not None, "run before start"
                _send(replies, ("ok", runner.run(payload)))
        except ModelshipError as exc:
            _send(replies, ("error", str(exc)))
