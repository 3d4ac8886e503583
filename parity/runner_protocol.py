"""The Runner protocol: what the parity engine, the batching wrapper and every command ask of a runner.

A runner maps `{input name: array}` to `{output name: array}`. It declares what its input sets hold (`takes`: named
tensors, or encoded image files for a served pipeline), the most rows it takes in one call (`max_batch`, None: any;
`batching.run_in_batches` splits larger sets), and is closed when done. `BaseRunner` gives the defaults.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

Tensors = dict[str, np.ndarray]
TAKES = ("tensors", "images")  # what a runner's input sets hold: named arrays, or image files (`{"images": paths}`)


@runtime_checkable
class Runner(Protocol):
    """Anything that turns named input arrays into named output arrays."""

    name: str

    @property
    def max_batch(self) -> int | None: ...

    @property
    def takes(self) -> str: ...

    def run(self, inputs: Tensors) -> Tensors: ...

    def close(self) -> None: ...


class BaseRunner:
    """The Runner protocol's defaults: any number of rows per call, named tensors in, nothing to close."""

    name: str = "runner"
    max_batch: int | None = None
    takes: str = "tensors"

    def run(self, inputs: Tensors) -> Tensors:
        raise NotImplementedError

    def close(self) -> None:
        return None
