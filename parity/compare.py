"""Compare functions, registered by output kind: how one kind of output is judged against its reference.

A task names the kind of each of its outputs (`modelship.tasks`); the engine looks the kind up here. A compare
function turns (reference array, candidate array, tolerance) into an `OutputResult`, pools one output's results over
the input sets, and says what a missing output scores. Built in:

- `logits`: element-wise tolerance, cosine floor, and top-1 / top-k agreement for classifier-shaped outputs;
- `tensor`: element-wise tolerance and cosine floor only (features, any other float tensor);
- `token_logits`: class scores per token ([batch, sequence, classes]): `logits` over every token's row.

A new kind (masks by agreement, boxes matched one to one, embeddings by similarity) is one module that calls
`register_compare` and registers its result type (`contract.parity_report.register_result`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

import modelship.parity.metrics as metrics
from modelship.contract.parity_report import OutputResult
from modelship.contract.registry import Registry
from modelship.parity.tolerance import Tolerance

R = TypeVar("R", bound=OutputResult)  # what the function's compare, aggregate and missing return
X = TypeVar("X")  # what compare and missing are given: one output's array, or (joint) every output of the set by name


@dataclass(frozen=True)
class CompareFunction(Generic[R, X]):
    """`compare(name, reference, candidate, tolerance)` judges one input set; `aggregate(results, tolerance)`
    pools an output's results over every set (worst case); `missing(name, reference, reason)` is the failed
    result of an output the candidate did not give or gave in another shape. A `joint` function's verdict spans
    outputs: `compare` and `missing` get every output of the set (name -> array) instead of one array, and the
    outputs it judges with it have the kind PART."""

    kind: str
    description: str
    compare: Callable[[str, X, X, Tolerance], R]
    aggregate: Callable[[Sequence[R], Tolerance], R]
    missing: Callable[[str, X, str], R]
    joint: bool = False

    def __post_init__(self) -> None:
        if not self.kind or not self.kind.replace("_", "").isalnum():
            raise ValueError(f"a compare kind is a plain name (letters, digits, _), got {self.kind!r}")


COMPARE_FUNCTIONS: Registry[CompareFunction[Any, Any]] = Registry("output kind")  # every kind's, whatever it takes


def register_compare(function: CompareFunction[R, X], *, replace: bool = False) -> CompareFunction[R, X]:
    """Add a compare function under its kind; a second function for a kind already taken is refused unless
    `replace`."""
    return COMPARE_FUNCTIONS.add(function.kind, function, replace=replace)


def compare_function(kind: str) -> CompareFunction[Any, Any]:
    """The compare function of `kind`, or a UsageError naming the kinds there are."""
    return COMPARE_FUNCTIONS.find(kind)


register_compare(
    CompareFunction(
        "logits",
        "element-wise tolerance, cosine, and top-1 / top-k agreement on classifier-shaped outputs",
        metrics.compare_arrays,
        metrics.aggregate,
        metrics.unmatched,
    )
)
register_compare(
    CompareFunction(
        "tensor",
        "element-wise tolerance and cosine",
        functools.partial(metrics.compare_arrays, topk=False),
        metrics.aggregate,
        functools.partial(metrics.unmatched, topk=False),
    )
)


def compare_token_logits(name: str, reference: np.ndarray, candidate: np.ndarray, tolerance: Tolerance) -> OutputResult:
    """`logits` with one row per token: top-1 / top-k agreement is over every (text, token) position."""
    ref, cand = np.asarray(reference), np.asarray(candidate)
    if ref.shape != cand.shape or ref.ndim != 3:
        return metrics.unmatched(name, ref, f"shape {cand.shape} differs from reference {ref.shape}")
    rows = metrics.compare_arrays(name, ref.reshape(-1, ref.shape[-1]), cand.reshape(-1, cand.shape[-1]), tolerance)
    return dataclasses.replace(rows, shape=tuple(ref.shape))


register_compare(
    CompareFunction(
        "token_logits",
        "logits per token: element-wise tolerance, cosine, and top-1 / top-k agreement over every token",
        compare_token_logits,
        metrics.aggregate,
        metrics.unmatched,
    )
)
