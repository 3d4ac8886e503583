"""The Runner protocol: what the parity engine, the batching wrapper and every command ask of a runner.

A runner maps `{input name: array}` to `{output name: array}`. It declares what its input sets hold (`takes`: named
tensors, or encoded image files for a served pipeline), the most rows it takes in one call (`max_batch`, None: any;
`batching.run_in_batches` splits larger sets), and is closed when done. `BaseRunner` gives the defaults.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol, runtime_checkable

from modelship.contract.tensors import Tensors


class SetKind(StrEnum):
    """What a runner's input sets hold; IMAGES and TEXTS are also the key of such a set's one entry."""

    TENSORS = "tensors"  # named arrays
    IMAGES = "images"  # encoded image files (`{"images": paths}`)
    TEXTS = "texts"  # raw texts (`{"texts": strings}`)


@runtime_checkable
class Runner(Protocol):
    """Anything that turns named input arrays into named output arrays."""

    name: str

    @property
    def max_batch(self) -> int | None: ...

    @property
    def takes(self) -> SetKind: ...

    def run(self, inputs: Tensors) -> Tensors: ...

    def close(self) -> None: ...


class BaseRunner:
    """The Runner protocol's defaults: any number of rows per call, named tensors in, nothing to close."""

    name: str = "runner"

    @property
    def max_batch(self) -> int | None:
        return None

    @property
    def takes(self) -> SetKind:
        return SetKind.TENSORS

    def run(self, inputs: Tensors) -> Tensors:
        raise NotImplementedError

    def close(self) -> None:
        return None
