"""The one rule for names that become folder names and URL path segments: export names and Triton model names."""

from __future__ import annotations

import re

from modelship.contract.errors import ModelshipError

MAX_NAME = 128
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_name(name: str, what: str, error: type[ModelshipError]) -> str:
    """`name` if it is a safe single path component (no separators, no `..`, at most MAX_NAME characters), else
    `error` naming `what` and the rule."""
    if not isinstance(name, str) or len(name) > MAX_NAME or not _SAFE_NAME.fullmatch(name) or ".." in name:
        raise error(
            f"{what} {name!r} is not a safe folder name",
            hint=f"use letters, digits, '_', '-', '.', starting with a letter or digit (at most {MAX_NAME} "
            "characters, no '..')",
        )
    return name
