"""All-or-nothing writes, for exports and model repositories alike: build in a staging folder beside the
destination (same filesystem), then `commit` a `StagedChanges` of renames with a journal, so an error undoes what was
applied and a killed process's half-applied plan is rolled back by the next run (`roll_back`, `sweep`).

A staging folder's name carries the pid of the process building it (`.<name>.<pid>-<random>.staging`), so a later
run can tell the leftovers of a killed process from a folder another process is still building, and remove them
(rolling back their journal first).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from modelship.contract.errors import ExportError, ModelshipError, os_failure

_LEFTOVER = re.compile(r"^\..+\.(?P<pid>\d+)-[^.]+\.(staging|replaced)$")
JOURNAL = "journal.json"


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists on this machine (one we may not signal counts as alive)."""
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
            if match and path.is_dir() and int(match["pid"]) != os.getpid() and not process_alive(int(match["pid"])):
                roll_back(path)
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


def missing_parents(folder: Path) -> list[Path]:
    """`folder`'s ancestors that do not exist yet, the deepest first (what `writable_parent` will create)."""
    return [p for p in folder.resolve().parents if not p.exists()]


def remove_if_empty(folders: list[Path]) -> None:
    """Remove each of `folders` (the deepest first) that is empty: what a failed command created and left nothing in."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


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


class ChangeAction(StrEnum):
    """What one journaled change does to its target."""

    NEW = "new"
    REPLACE = "replace"
    REMOVE = "remove"


@dataclass
class Change:
    """One rename into the repository and how to undo it.

    action "new": `source` (staged) becomes `target`, which did not exist; undone by removing `target`.
    action "replace": `source` replaces the file `target`, whose old content is kept at `backup` (a hard link);
    undone by putting `backup` back. action "remove": `target` moves to `backup`; undone by moving it back.
    """

    action: ChangeAction
    target: str
    source: str = ""
    backup: str = ""

    def __post_init__(self) -> None:
        self.action = ChangeAction(self.action)  # a journal read back holds the plain string


@dataclass
class StagedChanges:
    """Every change of one all-or-nothing write, applied together by `commit`; `folder` (outside the destination,
    on its filesystem) holds the journal and the backups."""

    folder: Path
    changes: list[Change] = field(default_factory=list)

    def new(self, source: Path, target: Path) -> None:
        self.changes.append(Change(ChangeAction.NEW, str(target), source=str(source)))

    def replace(self, source: Path, target: Path) -> None:
        backup = self.folder / "backup" / f"{len(self.changes)}-{target.name}"
        self.changes.append(Change(ChangeAction.REPLACE, str(target), source=str(source), backup=str(backup)))

    def remove(self, target: Path) -> None:
        backup = self.folder / "backup" / f"{len(self.changes)}-{target.name}"
        self.changes.append(Change(ChangeAction.REMOVE, str(target), backup=str(backup)))


def commit(plan: StagedChanges, failure: Callable[[Path, OSError], ModelshipError]) -> None:
    """Apply `plan` all or nothing: journal it, apply each change, mark the journal done. On an error the applied
    changes are undone (newest first) and `failure(path, error)` is raised."""
    journal = plan.folder / JOURNAL
    (plan.folder / "backup").mkdir(exist_ok=True)
    _write_journal(journal, plan.changes, done=False)
    try:
        for change in plan.changes:
            _apply(change)
    except OSError as exc:
        _undo(plan.changes)
        journal.unlink(missing_ok=True)
        raise failure(Path(exc.filename or plan.changes[0].target), exc) from None
    _write_journal(journal, plan.changes, done=True)


def _apply(change: Change) -> None:
    target = Path(change.target)
    if change.action is ChangeAction.NEW:
        if target.exists():
            raise FileExistsError(17, "appeared while publishing", str(target))
        os.rename(change.source, target)
    elif change.action is ChangeAction.REPLACE:
        if target.exists():
            os.link(target, change.backup)
        os.replace(change.source, target)
    else:
        os.rename(target, change.backup)


def _undo(changes: list[Change]) -> None:
    """Undo whichever of `changes` took effect (each check makes this safe to run again after a crash)."""
    for change in reversed(changes):
        target, backup = Path(change.target), Path(change.backup) if change.backup else None
        with contextlib.suppress(OSError):
            if change.action is ChangeAction.NEW:
                if target.is_dir() and not Path(change.source).exists():
                    shutil.rmtree(target)
                elif target.is_file() and not Path(change.source).exists():
                    target.unlink()
            elif backup is not None and backup.exists():
                os.replace(backup, target)
            elif change.action is ChangeAction.REPLACE and not Path(change.source).exists():
                target.unlink()  # the file was new to the repository: it had no backup


def _write_journal(path: Path, changes: list[Change], *, done: bool) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as handle:
        json.dump({"done": done, "changes": [vars(c) for c in changes]}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def roll_back(folder: Path) -> list[str]:
    """Undo the plan journaled in `folder` if it was not finished; the targets put back (none when it was done)."""
    try:
        data = json.loads((Path(folder) / JOURNAL).read_text())
    except (OSError, json.JSONDecodeError):
        return []  # no journal: nothing was applied (it is written, atomically, before any change)
    if data.get("done"):
        return []
    changes = [Change(**c) for c in data.get("changes", [])]
    _undo(changes)
    return [c.target for c in changes]
