"""The Python-backend stub processes of a running `tritonserver`, found from /proc: which model instance each
runs, which version folder it loaded, and the shared-memory region it talks to the server through."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

STUB_BINARY = "triton_python_backend_stub"


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (from /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(child) for child in task.read_text().split()]
    return found


@dataclass(frozen=True)
class Stub:
    """A Python-backend stub process as Triton started it (its command line): the model instance it runs (Triton's
    instance name, MODEL_GROUP_INDEX, or the bare model name for a model-level stub that a load starts and ends)
    and the version folder it loaded, in the repository or in the copy Triton made of an object-storage one."""

    pid: int
    instance: str
    version: str

    def model(self, names: Collection[str]) -> str | None:
        """The model this stub runs an instance of, among Triton's model `names`; None for a model-level stub."""
        match = re.fullmatch(r"(.+)_\d+_\d+", self.instance)
        return match.group(1) if match and match.group(1) in names else None


@dataclass(frozen=True)
class StubProcess(Stub):
    """A stub with what it holds outside its process: its shared-memory region and the model file it loaded."""

    shm_region: str = ""
    model_file: Path = Path()


def stub_processes(server_pid: int) -> dict[int, StubProcess]:
    """The stubs the server `server_pid` runs now, by pid (from their command lines)."""
    stubs = {}
    for pid in _children(server_pid):
        try:
            argv = [os.fsdecode(a) for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if argv and argv[0].endswith(STUB_BINARY) and len(argv) > 8:
            model_file = Path(argv[1])
            stubs[pid] = StubProcess(pid, argv[8], model_file.parent.name, shm_region=argv[2], model_file=model_file)
    return stubs
