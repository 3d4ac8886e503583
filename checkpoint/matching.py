"""Strict comparison of a state dict against a model's: missing, unexpected, shape mismatches, grouped for people."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Shapes = dict[str, tuple[int, ...]]

# Keys a model may lack in the checkpoint without changing its eval-mode outputs (BatchNorm's counter is only
# used in train mode with momentum=None); reported as allowed, never silently.
HARMLESS_MISSING = ("*.num_batches_tracked",)


@dataclass(frozen=True)
class ShapeMismatch:
    """A key both have, with a different shape in the checkpoint than in the model."""

    key: str
    checkpoint: list[int]
    model: list[int]


@dataclass(frozen=True)
class KeyComparison:
    """The model's keys the checkpoint lacks, the checkpoint's the model lacks (each split by the allow globs into
    problems and allowed), and the keys both have with different shapes."""

    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    shape_mismatches: tuple[ShapeMismatch, ...] = ()
    allowed_missing: tuple[str, ...] = ()
    allowed_unexpected: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.shape_mismatches)


def compare_keys(
    checkpoint: Shapes,
    model: Shapes,
    allow_missing: Iterable[str] = (),
    allow_unexpected: Iterable[str] = (),
) -> KeyComparison:
    """Compare key sets and shapes; keys matching an allow glob move to the `allowed_*` lists."""
    missing: dict[bool, list[str]] = {True: [], False: []}  # allowed or not
    unexpected: dict[bool, list[str]] = {True: [], False: []}
    allow_missing = (*HARMLESS_MISSING, *allow_missing)
    for key in model:
        if key not in checkpoint:
            missing[any(fnmatch.fnmatchcase(key, glob) for glob in allow_missing)].append(key)
    for key in checkpoint:
        if key not in model:
            unexpected[any(fnmatch.fnmatchcase(key, glob) for glob in allow_unexpected)].append(key)
    return KeyComparison(
        missing=tuple(missing[False]),
        unexpected=tuple(unexpected[False]),
        shape_mismatches=tuple(
            ShapeMismatch(key, list(checkpoint[key]), list(model[key]))
            for key in checkpoint
            if key in model and tuple(checkpoint[key]) != tuple(model[key])
        ),
        allowed_missing=tuple(missing[True]),
        allowed_unexpected=tuple(unexpected[True]),
    )


def group_keys(keys: Sequence[str], max_groups: int = 8) -> list[tuple[str, int]]:
    """(module prefix, count) groups, as deep as possible while at most `max_groups` groups remain."""
    if not keys:
        return []
    modules = [key.rpartition(".")[0].split(".") if "." in key else [key] for key in keys]
    for depth in range(max(len(m) for m in modules), 0, -1):
        counts: dict[str, int] = {}
        for parts in modules:
            prefix = ".".join(parts[:depth])
            counts[prefix] = counts.get(prefix, 0) + 1
        if len(counts) <= max_groups or depth == 1:
            return list(counts.items())
    raise AssertionError("unreachable")


def summarize(keys: Sequence[str], max_groups: int = 6) -> str:
    """'layer4 (10), fc (2)': a one-line grouped summary; extra groups folded into '+N more'."""
    groups = group_keys(keys, max_groups)
    shown = ", ".join(f"{prefix} ({count})" for prefix, count in groups[:max_groups])
    return shown + (f", +{len(groups) - max_groups} more groups" if len(groups) > max_groups else "")


def describe_problems(comparison: KeyComparison) -> str:
    """One line naming every kind of mismatch with grouped counts."""
    parts = []
    if comparison.missing:
        parts.append(f"{len(comparison.missing)} missing keys [{summarize(comparison.missing)}]")
    if comparison.unexpected:
        parts.append(f"{len(comparison.unexpected)} unexpected keys [{summarize(comparison.unexpected)}]")
    if comparison.shape_mismatches:
        first = comparison.shape_mismatches[0]
        parts.append(
            f"{len(comparison.shape_mismatches)} shape mismatches "
            f"[{summarize([m.key for m in comparison.shape_mismatches])}; e.g. {first.key}: checkpoint "
            f"{tuple(first.checkpoint)} vs model {tuple(first.model)}]"
        )
    return "; ".join(parts)
