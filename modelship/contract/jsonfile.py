"""JSON at modelship's edges: the type of a JSON object, and reading the small JSON files users hand to modelship
(tolerances, preprocessing specs, sidecars)."""

from __future__ import annotations

import json
from pathlib import Path

from modelship.contract.errors import ModelshipError, UsageError
from modelship.contract.json_object import JsonObject

__all__ = ["JsonObject", "read_json_object"]

"""A JSON object as it crosses an edge: written to or read from a file, a pipe, a server or `--json`, or handed to
another library (Triton's model config, transformers' config.json). Data modelship defines is a dataclass inside;
its `to_dict` / `from_dict` are where it becomes a JsonObject and back."""


def read_json_object(
    path: Path, what: str, *, error: type[ModelshipError] = UsageError, hint: str | None = None
) -> JsonObject:
    """The JSON object in `path`; a missing, unreadable or non-object file raises `error` naming the file."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise error(f"{path}: {what} not found", hint=hint) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{path}: {what} is not readable JSON ({exc})", hint=hint) from None
    if not isinstance(data, dict):
        raise error(f"{path}: {what} must hold one JSON object, not {type(data).__name__}", hint=hint)
    return data
