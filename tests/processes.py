"""Looking at processes a test started: the JSON object `modelship serve --json` prints once ready, a process's
descendants and command line (from /proc), and a kill timed by what the process has done rather than by a delay."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def ready_json(process: subprocess.Popen) -> dict:
    """The JSON object the process prints first on stdout (`serve --json` once the server is ready)."""
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("}"):
            break
    return json.loads("".join(lines))


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (a thread or process that ends while it is read is left out)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            children = task.read_text().split()
        except OSError:  # the thread ended between the listing and the read
            continue
        for child in children:
            found += [int(child), *descendants(int(child))]
    return found


def cmdline(pid: int) -> list[str]:
    """The process's argv ([] once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def kill_when(process: subprocess.Popen, reached: Callable[[], bool], timeout_s: float = 120.0) -> None:
    """SIGKILL `process` as soon as `reached()` holds (polled every 20 ms), so the kill lands at the point a test is
    about; fails if the process ends first or the point is not reached within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not reached():
        assert process.poll() is None, f"the process ended (exit code {process.returncode}) before the kill point"
        assert time.monotonic() < deadline, f"the kill point was not reached in {timeout_s:.0f} s"
        time.sleep(0.02)
    process.kill()
    process.wait()
