"""A Triton model repository on disk: safe names, numbered versions, a lock, and atomic installs.

Layout: `<repo>/<model>/config.pbtxt`, `<repo>/<model>/<version>/<model file>`. Guarantees:
- A model or version folder appears whole or not at all: files are staged in `<parent>/.<repo name>.staging/`
  (beside the repository, so on the same filesystem, but outside it: Triton tries to load every folder inside a
  repository, hidden ones too) and moved in with one `os.rename`. Model-level files (config.pbtxt, labels.txt,
  ...) are replaced with `os.replace`. A publisher killed at any point leaves only a stale staging folder,
  removed by the next publisher.
- Existing versions are never touched; a new one is max(existing) + 1, or an explicit number that must be free.
- `<repo>/.modelship.lock` (a file lock, released by the OS if its holder dies) serialises publishers, so two
  concurrent publishers get distinct versions.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from export.errors import PublishError

LOCK_NAME = ".modelship.lock"
LOCK_TIMEOUT_S = 300
# Triton model names become folder names and URL path segments: keep them boring.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_model_name(name: str) -> str:
    """`name` if it is a safe single path component and URL segment, else PublishError."""
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name) or name in (".", "..") or ".." in name:
        raise PublishError(
            f"model name {name!r} is not a safe folder name",
            hint="use letters, digits, '_', '-', '.', starting with a letter or digit (at most 128 characters)",
        )
    return name


def versions(model_dir: Path) -> list[int]:
    """The numbered version folders of one model, ascending."""
    if not model_dir.is_dir():
        return []
    return sorted(int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit() and p.name[0] != "0")


def choose_version(model_dir: Path, requested: int | None) -> int:
    existing = versions(model_dir)
    if requested is None:
        return (existing[-1] + 1) if existing else 1
    if requested < 1:
        raise PublishError(f"version must be a positive integer, got {requested}")
    if requested in existing:
        raise PublishError(
            f"{model_dir / str(requested)} already exists", hint="versions are immutable: omit --version for the next"
        )
    return requested


@contextlib.contextmanager
def locked(repo: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the repository's publish lock; clears stale staging folders left by killed publishers."""
    repo.mkdir(parents=True, exist_ok=True)
    staging = staging_root(repo)
    if staging.parent.stat().st_dev != repo.stat().st_dev:
        raise PublishError(
            f"{repo} is a mount point: staged files could not be moved into it atomically",
            hint="publish into a folder inside the mounted volume",
        )
    lock = FileLock(str(repo / LOCK_NAME))
    try:
        lock.acquire(timeout=timeout_s)
    except Timeout:
        raise PublishError(f"{repo}: another publisher holds {LOCK_NAME} for over {timeout_s:.0f} s") from None
    try:
        shutil.rmtree(staging, ignore_errors=True)
        yield
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        lock.release()


def staging_root(repo: Path) -> Path:
    repo = repo.resolve()
    return repo.parent / f".{repo.name}.staging"


def staging_dir(repo: Path) -> Path:
    """A fresh folder on the repository's filesystem to build files in before moving them into place."""
    root = staging_root(repo)
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=root))


def install_version(staged: Path, model_dir: Path, version: int) -> Path:
    """Move a fully written version folder into place in one rename."""
    model_dir.mkdir(parents=True, exist_ok=True)
    target = model_dir / str(version)
    os.rename(staged, target)
    return target
