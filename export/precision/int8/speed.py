"""INT8 against fp32 on this CPU: ONNX Runtime's median time per run, the inputs it is timed on, and the ratios."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from modelship.contract.iospec import IOSpec
from modelship.contract.tensors import Tensors

SPEED_SECONDS = 0.6  # timed per model and batch, after a warm-up run
SPEED_MIN_RUNS = 3


def seconds_per_run(path: Path, inputs: Tensors) -> float:
    """ONNX Runtime's median seconds for one run of the graph at `path` on `inputs`, on this CPU (default threads
    and graph optimisations, as the serving backend runs it)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    taken = {i.name for i in session.get_inputs()}
    feed = {k: v for k, v in inputs.items() if k in taken}
    session.run(None, feed)
    times: list[float] = []
    deadline = time.perf_counter() + SPEED_SECONDS
    while len(times) < SPEED_MIN_RUNS or time.perf_counter() < deadline:
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def speed_inputs(sets: Sequence[Tensors], io: IOSpec, largest: int) -> dict[int, Tensors]:
    """One input of 1 row and one of `largest` rows (rows of the held-back sets, repeated when there are fewer);
    a single-row graph is timed at 1 row only."""
    first = sets[0]
    batches = [1] if io.max_rows == 1 or not io.batched else sorted({1, largest})
    same = [s for s in sets if all(s[k].shape[1:] == v.shape[1:] for k, v in first.items())]
    rows = {k: np.concatenate([s[k] for s in same]) for k in first}
    count = len(next(iter(rows.values())))
    return {b: {k: np.take(v, np.arange(b) % count, axis=0) for k, v in rows.items()} for b in batches}


def speedups(fp32: Path, int8: Path, inputs: dict[int, Tensors]) -> dict[str, float]:
    """fp32 time / INT8 time at each batch, measured side by side."""
    return {
        f"batch {batch}": round(seconds_per_run(fp32, feed) / seconds_per_run(int8, feed), 3)
        for batch, feed in inputs.items()
    }
