"""Looking at processes a test started: the JSON object `modelship serve --json` prints once ready, a process's
descendants and command line (from /proc)."""

from __future__ import annotations

import json
import subprocess
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
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in task.read_text().split():
            found += [int(child), *descendants(int(child))]
    return found


def cmdline(pid: int) -> list[str]:
    """The process's argv ([] once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []
