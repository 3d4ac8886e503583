"""A user's own code, `package.module:Factory` (a class or function, imported from the current folder or the
import path; and a pickled module's class with --trust-checkpoint): nothing is known beyond what the checkpoint's
metadata says. The fallback family: it owns every name no other family owns."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from modelship.checkpoint.families.registry import ModelFamily, register_family
from modelship.contract.errors import ArchitectureError


def canonical(name: str) -> str | None:
    if ":" not in name:
        return None
    module, _, attr = name.partition(":")
    if not module or not attr:
        raise ArchitectureError(f"--arch {name!r}: an import path must look like package.module:Factory")
    return name


def build(arch: str) -> Callable[..., Any]:
    module_name, _, attr = arch.partition(":")
    with _cwd_importable():
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise ArchitectureError(
                f"--arch {arch!r}: cannot import {module_name!r} ({exc})",
                hint="run from the folder that holds the package, or add it to PYTHONPATH",
            ) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ArchitectureError(f"--arch {arch!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ArchitectureError(f"--arch {arch!r}: {attr!r} is not a class or function")
    return obj


@contextlib.contextmanager
def _cwd_importable() -> Iterator[None]:
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added:
            sys.path.remove(cwd)


FAMILY = register_family(
    ModelFamily("factory", owns=lambda arch: True, canonical=canonical, build=build, fallback=True)
)
