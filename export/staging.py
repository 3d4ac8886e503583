"""Staging folders for all-or-nothing writes: built beside their destination (same filesystem), renamed into place.

A staging folder's name carries the pid of the process building it (`.<name>.<pid>-<random>.staging`), so a later
run can tell the leftovers of a killed process from a folder another process is still building, and remove them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from export.errors import ExportError, os_failure

_LEFTOVER = re.compile(r"^\..+\.(?P<pid>\d+)-[^.]+\.(staging|replaced)$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(parent: Path) -> list[Path]:
    """Remove the staging folders in `parent` whose process is gone; the folders removed."""
    removed = []
    with contextlib.suppress(OSError):
        for path in Path(parent).iterdir():
            match = _LEFTOVER.match(path.name)
            if match and path.is_dir() and int(match["pid"]) != os.getpid() and not _alive(int(match["pid"])):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def staging_folder(parent: Path, name: str, suffix: str = "staging") -> Path:
    """A new empty folder `parent/.<name>.<pid>-<random>.<suffix>` with the umask's ordinary permissions."""
    folder = Path(tempfile.mkdtemp(prefix=f".{name}.{os.getpid()}-", suffix=f".{suffix}", dir=parent))
    umask = os.umask(0o022)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)  # mkdtemp makes it private (0700); what lands is an ordinary folder
    return folder


def writable_parent(folder: Path, what: str) -> Path:
    """Create `folder`'s parent if needed; ExportError naming it when the filesystem refuses."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        probe = staging_folder(folder.parent, folder.name, "probe")
        probe.rmdir()
    except OSError as exc:
        where = f"{folder.parent}: cannot write {what} there"
        raise os_failure(ExportError, exc, where, "choose a writable folder with free space (--out)") from None
    return folder.parent
