"""Input sets split to what a runner accepts: a served model takes at most its `max_batch_size` rows a request.

A runner with a batch limit says so with its `max_batch` (None or 0: no limit); `run_in_batches` sends a
larger input set in chunks of that size along the batch axis and joins the outputs, so a parity check or a
client over 40 images works against a model published with `max_batch_size` 16.
"""

from __future__ import annotations

import numpy as np

from modelship.contract.tensors import Tensors
from modelship.parity.runner_protocol import Runner


def batch_limit(runner: Runner) -> int | None:
    """The most rows `runner` takes in one call, or None when it takes any number."""
    limit = runner.max_batch
    return int(limit) if limit else None


def batch_size(inputs: Tensors) -> int:
    """The rows of an input set: the first dim of its first input (1 for scalars)."""
    first = next(iter(inputs.values()), None)
    return int(np.shape(first)[0]) if first is not None and np.ndim(first) > 0 else 1


def run_in_batches(runner: Runner, inputs: Tensors) -> Tensors:
    """`runner.run(inputs)`, in chunks of the runner's batch limit when the set is larger, outputs joined."""
    limit, rows = batch_limit(runner), batch_size(inputs)
    if limit is None or rows <= limit:
        return runner.run(inputs)
    parts = [runner.run({k: v[i : i + limit] for k, v in inputs.items()}) for i in range(0, rows, limit)]
    return {name: np.concatenate([np.asarray(part[name]) for part in parts]) for name in parts[0]}
