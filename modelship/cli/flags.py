"""Flag groups: click options that become one typed value. A command decorated with `flag_group("serving",
OPTIONS, build)` receives `serving=build(**values of OPTIONS)` instead of the options' raw values, so commands take
dataclasses (validated in their `__post_init__`, errors as UsageError lines) and never pass `**kwargs` around."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def flag_group(param: str, options: Sequence[Decorator], build: Callable[..., Any]) -> Callable[[F], F]:
    """Add `options` to a click command; their values reach it as the single argument `param` = `build(...)`."""
    probe: Callable[[], None] = lambda: None  # noqa: E731 - only collects the options' parameter names
    for option in options:
        option(probe)
    names = [p.name for p in probe.__click_params__]  # type: ignore[attr-defined]

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def command(*args: Any, **values: Any) -> Any:
            own = {name: values.pop(name) for name in names}
            return func(*args, **values, **{param: build(**own)})

        for option in reversed(options):
            option(command)
        return command  # type: ignore[return-value]

    return decorate


class PrecisionChoice(click.Choice):
    """The registered precisions (contract.precisions), read when a command line is parsed: one registered after
    the command was defined is a choice too."""

    def __init__(self) -> None:
        super().__init__((), case_sensitive=True)

    @property
    def choices(self) -> tuple[str, ...]:
        from modelship.contract.precisions import precision_names

        return precision_names()

    @choices.setter
    def choices(self, _value: Any) -> None:
        """Fixed by the registry."""
