"""`Registry`: the one shape of every registry in the project (tasks, compare functions, result and detail types,
export formats): named entries of one kind, added once, looked up by the name a manifest or a flag gives."""

from __future__ import annotations

from typing import TypeVar

from modelship.contract.errors import UsageError

T = TypeVar("T")


class Registry(dict[str, T]):
    """Entries by name. `add` refuses a second entry under a name already taken unless told to `replace` it; `find`
    names the entries there are when one is missing. A plain dict otherwise (a test may `pop` what it added)."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def add(self, name: str, entry: T, *, replace: bool = False) -> T:
        if name in self and not replace:
            raise ValueError(f"a {self.what} named {name!r} is already registered (replace=True replaces it)")
        self[name] = entry
        return entry

    def find(self, name: str) -> T:
        try:
            return self[name]
        except KeyError:
            raise UsageError(f"unknown {self.what} {name!r}", hint=f"use one of {', '.join(sorted(self))}") from None
