"""A Triton model repository on disk: safe names, numbered versions, a lock, and all-or-nothing installs.

Layout: `<repo>/<model>/config.pbtxt`, `<repo>/<model>/<version>/<model file>`. Guarantees:
- Nothing is written into the repository until everything a publish needs is staged and verified: files are
  staged in `<parent>/.<repo name>.staging/` (beside the repository, so on the same filesystem, but outside it:
  Triton tries to load every folder inside a repository, hidden ones too).
- `commit` then applies every change of one publish (new model folders, new version folders, replaced model-level
  files) as renames, recording each in a journal first. A failure part-way undoes the applied ones, so the
  repository is as it was; a publisher killed part-way leaves the journal, and the next `locked()` (the next
  publish, or `modelship serve` starting) rolls it back before anything else happens. A journal marked done is
  a finished publish and is only cleaned up.
- Existing versions are never touched; a new one is max(existing) + 1, or an explicit number that must be free.
- `<parent>/.<repo name>.lock` (a file lock, released by the OS if its holder dies) serialises publishers, so
  two concurrent publishers get distinct versions. It lives beside the repository so a failed publish leaves the
  repository itself byte-identical.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from modelship.contract import staging
from modelship.contract.errors import PublishError, os_failure
from modelship.contract.names import check_name
from modelship.contract.staging import JOURNAL, StagedChanges, roll_back

LOCK_TIMEOUT_S = 300


def check_model_name(name: str) -> str:
    """`name` if it is a safe single path component and URL segment, else PublishError."""
    return check_name(name, "model name", PublishError)


def versions(model_dir: Path) -> list[int]:
    """The numbered version folders of one model, ascending."""
    if not model_dir.is_dir():
        return []
    return sorted(int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit() and p.name[0] != "0")


def check_version(requested: int | None) -> None:
    """PublishError for a version number that can never be valid (checked before anything touches the disk)."""
    if requested is not None and requested < 1:
        raise PublishError(f"--version must be a positive integer, got {requested}", hint="omit it for latest + 1")


def choose_version(model_dir: Path, requested: int | None) -> int:
    check_version(requested)
    existing = versions(model_dir)
    if requested is None:
        return (existing[-1] + 1) if existing else 1
    if requested in existing:
        raise PublishError(
            f"{model_dir / str(requested)} already exists", hint="versions are immutable: omit --version for the next"
        )
    return requested


def _unwritable(path: Path, exc: OSError) -> PublishError:
    hint = "publish to a writable folder with free space (--repo), or fix its permissions"
    return os_failure(PublishError, exc, f"{path}: cannot write the model repository", hint)


@contextlib.contextmanager
def locked(repo: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the repository's publish lock; rolls back a publish a killed publisher left half-applied and clears
    stale staging folders. A repository this call created is removed again if the block fails."""
    repo = Path(repo)
    created = not repo.exists()
    try:
        repo.mkdir(parents=True, exist_ok=True)
        area = staging_root(repo)
        if area.parent.stat().st_dev != repo.stat().st_dev:
            raise PublishError(
                f"{repo} is a mount point: staged files could not be moved into it atomically",
                hint="publish into a folder inside the mounted volume",
            )
        lock = FileLock(str(lock_path(repo)))
        lock.acquire(timeout=timeout_s)
    except Timeout:
        raise PublishError(f"{repo}: another publisher holds {lock_path(repo)} for over {timeout_s:.0f} s") from None
    except OSError as exc:
        _remove_if_empty(repo, created)
        raise _unwritable(repo, exc) from None
    try:
        recover(repo)
        yield
    except BaseException:
        _remove_if_empty(repo, created)
        raise
    finally:
        shutil.rmtree(area, ignore_errors=True)
        lock.release()


def _remove_if_empty(repo: Path, created: bool) -> None:
    if created:
        with contextlib.suppress(OSError):
            repo.rmdir()


def lock_path(repo: Path) -> Path:
    repo = repo.resolve()
    return repo.parent / f".{repo.name}.lock"


def staging_root(repo: Path) -> Path:
    repo = repo.resolve()
    return repo.parent / f".{repo.name}.staging"


def staging_dir(repo: Path) -> Path:
    """A fresh folder on the repository's filesystem to build files in before moving them into place."""
    root = staging_root(repo)
    try:
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=root))
    except OSError as exc:
        raise _unwritable(root, exc) from None


def recover(repo: Path) -> list[str]:
    """Roll back every publish a killed publisher left half-applied (call with the lock held); the targets it put
    back, for the log."""
    root = staging_root(repo)
    restored: list[str] = []
    for journal in sorted(root.glob(f"*/{JOURNAL}")) if root.is_dir() else []:
        restored += roll_back(journal.parent)
        shutil.rmtree(journal.parent, ignore_errors=True)
    return restored


def commit(plan: StagedChanges) -> None:
    """Apply one publish's plan all or nothing (contract.staging.commit); a PublishError names what failed."""
    staging.commit(plan, _unwritable)
