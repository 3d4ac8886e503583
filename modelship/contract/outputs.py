"""Stable names for whatever a model's forward returns: a tensor, a tuple, a named tuple or a dict of tensors.

The names become ONNX output names, manifest output names and Triton output names, and the parity engine uses
the same flattening for every runner, so eager PyTorch, TorchScript and ONNX outputs line up by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelship.contract.errors import ExportError

SINGLE_OUTPUT = "output"


def flatten_outputs(result: Any) -> list[tuple[str, Any]]:
    """(name, tensor) pairs in a fixed order: dict keys (insertion order) and named-tuple fields name their
    tensors, plain sequences become `output_0`, `output_1`, ..., a single tensor is `output`. Nesting joins
    names with `_` (`{"a": (x, y)}` gives `a_0`, `a_1`)."""
    if _is_tensor(result):
        return [(SINGLE_OUTPUT, result)]
    pairs = _flatten(result, "")
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise ExportError(f"model outputs flatten to repeated names: {names}", hint="return a dict with unique keys")
    return pairs


def _flatten(value: Any, prefix: str) -> list[tuple[str, Any]]:
    if _is_tensor(value):
        return [(prefix or SINGLE_OUTPUT, value)]
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        items = list(zip(value._fields, value, strict=True))
    elif isinstance(value, (tuple, list)):
        items = [(f"output_{i}" if not prefix else str(i), v) for i, v in enumerate(value)]
    else:
        raise ExportError(
            f"model returned a {type(value).__name__}, not a tensor, tuple, named tuple or dict of tensors",
            hint="wrap the model so forward returns tensors",
        )
    pairs: list[tuple[str, Any]] = []
    for key, item in items:
        pairs.extend(_flatten(item, f"{prefix}_{key}" if prefix else key))
    return pairs


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (tuple, list, Mapping))
