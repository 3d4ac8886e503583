"""The label rule every writer follows: one label per line in Triton's `labels.txt`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelship.contract.errors import ModelshipError


def label_for(index: int, labels: Sequence[str] | None) -> str:
    """The label of class `index`, or the index itself when there are no labels or none for it."""
    return labels[index] if labels and 0 <= index < len(labels) else str(index)


def clean_labels(labels: Any, source: str) -> tuple[list[str], list[int]]:
    """Labels as Triton's one-label-per-line `labels.txt` needs them: strings (ints are written as text) with
    every line break replaced by a space, so the file has exactly one line per class. Returns the labels and the
    indices that changed; a ModelshipError for anything that is not a list of strings."""
    if not isinstance(labels, (list, tuple)) or not all(isinstance(v, (str, int)) for v in labels):
        raise ModelshipError(
            f"{source}: labels must be a list of strings (one per class), got {_describe(labels)}",
            hint="fix the labels, or pass --labels FILE to publish",
        )
    cleaned = [" ".join(str(label).splitlines()).strip() if isinstance(label, str) else str(label) for label in labels]
    changed = [i for i, (old, new) in enumerate(zip(labels, cleaned, strict=True)) if str(old) != new]
    return cleaned, changed


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        odd = next(v for v in value if not isinstance(v, (str, int)))
        return f"a list holding a {type(odd).__name__}"
    return f"a {type(value).__name__}"
