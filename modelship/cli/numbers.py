"""Numeric flags checked before any work, in one place: a number that is finite and within its range, or click's
usage error naming the flag and the range (exit 2, one line; one JSON object with --json). NaN passes every
comparison click's own FloatRange makes, so `--p99-ms nan` measured for minutes before; `--server-cores 0` never
ended."""

from __future__ import annotations

import math
from typing import Any

import click


class Bounded(click.ParamType):
    """A finite number (an integer when `integer`) with `low` < value (or <= when `low_closed`) and value <= `high`."""

    def __init__(self, low: float, high: float, *, integer: bool = False, low_closed: bool = False) -> None:
        self.low, self.high, self.integer, self.low_closed = low, high, integer, low_closed
        self.name = "integer" if integer else "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float | int:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        above = number >= self.low if self.low_closed else number > self.low
        if not math.isfinite(number) or not above or number > self.high:
            self.fail(f"{value!r} is not {self.describe()}", param, ctx)
        if self.integer:
            if number != int(number):
                self.fail(f"{value!r} is not a whole number", param, ctx)
            return int(number)
        return number

    def describe(self) -> str:
        if self.low_closed:
            return f"a finite {self.name} from {_shown(self.low)} to {_shown(self.high)}"
        return f"a finite {self.name} above {_shown(self.low)} and at most {_shown(self.high)}"


def _shown(number: float) -> str:
    return f"{int(number):,}" if number == int(number) else f"{number:g}"


def positive(high: float) -> Bounded:
    """A finite number above 0, at most `high`."""
    return Bounded(0, high)


def at_least_zero(high: float) -> Bounded:
    """A finite number from 0, at most `high`."""
    return Bounded(0, high, low_closed=True)


def whole(low: int, high: int) -> Bounded:
    """A whole number from `low` to `high`."""
    return Bounded(low, high, integer=True, low_closed=True)


def count(high: int) -> Bounded:
    """A whole number from 1 to `high`."""
    return whole(1, high)


def fraction() -> Bounded:
    """A finite number from 0 to 1."""
    return Bounded(0, 1, low_closed=True)


MAX_BATCH = 4096  # the largest batch a flag may ask for: past it an example batch only exhausts memory
PORT = whole(1, 65535)  # a TCP port
SECONDS = positive(86_400)  # a wait or a duration in seconds, at most a day
