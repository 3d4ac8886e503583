"""Compare a candidate runner against a reference runner over several input sets."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from modelship.contract.errors import ModelshipError
from modelship.contract.parity_report import OutputMetrics, ParityReport
from modelship.export.parity.batching import batch_size, run_in_batches
from modelship.export.parity.metrics import aggregate, compare_arrays, unmatched
from modelship.export.parity.runners import Runner, Tensors
from modelship.export.parity.tolerance import ToleranceConfig


def compare_runners(
    reference: Runner,
    candidate: Runner,
    input_sets: Sequence[Tensors],
    tolerance: ToleranceConfig,
    *,
    labels: Sequence[str] | None = None,
) -> ParityReport:
    """Run both runners on every input set and judge each reference output against the candidate's.

    The candidate gets each set in chunks of its batch limit (`batching.run_in_batches`). A candidate that raises
    (it crashed, ONNX Runtime rejected the inputs, the server refused or did not answer) gives a failed report
    with `error` set to the cause; a failing reference raises, since without it nothing can be judged.
    """
    if not input_sets:
        raise ValueError("compare_runners needs at least one input set")
    start = time.perf_counter()
    batch_sizes = [batch_size(inputs) for inputs in input_sets]
    labels = list(labels) if labels is not None else [f"#{i} batch {b}" for i, b in enumerate(batch_sizes)]
    per_output: dict[str, list[OutputMetrics]] = {}
    per_batch = []
    error = None
    for label, inputs in zip(labels, input_sets, strict=True):
        expected = reference.run(inputs)
        try:
            actual = run_in_batches(candidate, inputs)
        except Exception as exc:  # whatever a candidate raises is its verdict, not the end of the check
            error = f"{label}: {candidate_error(exc)}"
            break
        results = [_compare_one(name, ref, actual.get(name), tolerance) for name, ref in expected.items()]
        for metrics in results:
            per_output.setdefault(metrics.name, []).append(metrics)
        per_batch.append(
            {"label": label, "passed": all(m.passed for m in results), "outputs": [m.to_dict() for m in results]}
        )
    outputs = [aggregate(sets, tolerance.for_output(name)) for name, sets in per_output.items()]
    return ParityReport(
        reference=reference.name,
        candidate=candidate.name,
        batch_sizes=batch_sizes,
        outputs=outputs,
        passed=error is None and all(m.passed for m in outputs),
        seconds=time.perf_counter() - start,
        tolerance=tolerance.to_dict(),
        per_batch=per_batch,
        error=error,
    )


def _compare_one(name: str, reference: np.ndarray, candidate: np.ndarray | None, tolerance: ToleranceConfig):
    if candidate is None:
        return unmatched(name, np.asarray(reference), "missing from the candidate's outputs")
    return compare_arrays(name, reference, candidate, tolerance.for_output(name))


def candidate_error(exc: Exception) -> str:
    """A candidate's failure as one line: a ModelshipError's message and hint, else the exception's type and text."""
    if isinstance(exc, ModelshipError):
        return str(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
