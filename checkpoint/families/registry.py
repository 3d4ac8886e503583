"""Model families: where a model comes from (torchvision, timm, a Hugging Face folder, a user's factory), and what
only its library knows, in the spirit of torchvision's weights API where a builder, its transforms and its meta
travel together.

A family entry declares, for the canonical architecture names it owns:
- `serving_spec`: the preprocessing its own config implies (stored in the manifest), when the checkpoint has none;
- `reference_transform`: the library's own per-image transform, which `parity --images` runs eager PyTorch through
  and compares modelship's preprocessing against;
- `labels`: the class names its reference weights know;
- `scripts`: whether its models go through `torch.jit.script` (a plain export-model writes TorchScript).

Families are asked in the order they registered; the first that owns a name answers, and a name none owns is the
fallback family's (a user's factory, `package.module:Factory`). A new family is one module calling
`register_family(ModelFamily(...))`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelship.contract.errors import UsageError
from modelship.contract.preprocessing import PreprocessSpec


@dataclass(frozen=True)
class ReferenceTransform:
    """A library's per-image torch transform (PIL RGB image -> tensor) and where it came from."""

    transform: Callable[[Any], Any]
    source: str


def _nothing(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class ModelFamily:
    """What one source of models knows about its own (see the module doc). The callables take the built model (or
    None when only the name is known), the canonical architecture name and the checkpoint's path."""

    name: str
    owns: Callable[[str], bool]
    serving_spec: Callable[[Any, str, Path], PreprocessSpec | None] = _nothing
    reference_transform: Callable[[Any, str, Path], ReferenceTransform | None] = _nothing
    labels: Callable[[str, int], list[str] | None] = _nothing
    scripts: bool = True
    fallback: bool = False  # owns what no other family owns


FAMILIES: dict[str, ModelFamily] = {}


def register_family(family: ModelFamily) -> ModelFamily:
    """Add `family` (a later one of the same name replaces it, keeping its place)."""
    FAMILIES[family.name] = family
    return family


def unregister_family(name: str) -> None:
    FAMILIES.pop(name, None)


def family_of(arch: str) -> ModelFamily:
    """The family that owns the canonical architecture name `arch`."""
    families = list(FAMILIES.values())
    for family in families:
        if not family.fallback and family.owns(arch):
            return family
    fallback = next((f for f in families if f.fallback), None)
    if fallback is None:
        raise UsageError(f"no model family owns the architecture {arch!r}")
    return fallback
