"""How sure a verdict on n inputs is: the 95% Wilson interval of an agreement (a share of n inputs that agree),
whether it tells a bar from a value `MARGIN` below it, and how many inputs that takes at the bar.

A held-back set of 24 photos moves an agreement by 0.042 a photo: a variant reading 0.917 there (above a 0.9 bar)
read 0.83-0.85 on 80 photos it never saw. The interval says so where the figure alone does not."""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959964  # the normal quantile of a two-sided 95% interval
MARGIN = 0.05  # a verdict should tell its bar from a value this far below it


def wilson(agreeing: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `agreeing` of `n` (0, 1 when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    share = agreeing / n
    centre = share + z * z / (2 * n)
    spread = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)


def inputs_to_resolve(bar: float, margin: float = MARGIN) -> int:
    """The fewest inputs whose interval around an agreement at `bar` excludes `bar - margin` (0.9: 184)."""
    n = 1
    while wilson(round(bar * n), n)[0] < bar - margin and n < 100_000:
        n += 1
    return n


@dataclass(frozen=True)
class Agreement:
    """An agreement measured on `n` inputs, judged against `bar`."""

    value: float
    n: int
    bar: float

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(round(self.value * self.n), self.n)

    @property
    def resolves(self) -> bool:
        """Whether the interval tells the bar from a value MARGIN below it: it does not hold both (1.000 on 30
        inputs, 0.89-1.00, is above 0.85 however few they are; 0.917 on 24, 0.74-0.98, could be either)."""
        low, high = self.interval
        return not (low <= self.bar - MARGIN and high >= self.bar)

    def describe(self, what: str) -> str:
        low, high = self.interval
        return f"{self.n} {what}: {self.value:.3f} ({low:.2f}-{high:.2f})"

    def warning(self, what: str, more: str) -> str | None:
        """One line when the interval cannot resolve the bar, e.g. "24 held-back photos: 0.917 (0.74-0.98); too few to
        tell 0.9 from 0.85: give at least 139 (...)"; `more` says how."""
        if self.resolves:
            return None
        return (
            f"{self.describe(what)}; too few to tell {self.bar:g} from {self.bar - MARGIN:g}: give at least "
            f"{inputs_to_resolve(self.bar)} {what} ({more})"
        )
