"""Run, then compare: runners give results (`run_sets`), compare functions judge them (`compare_results`).

Running and judging are apart, as in Polygraphy's Comparator: a reference's results can be computed once and
judged against any number of candidates, and a candidate that fails to run is a result too (its `error`), which
becomes that candidate's failed report instead of ending the check.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from modelship.contract.candidate_pool import REFERENCE_ONLY
from modelship.contract.errors import ModelshipError
from modelship.contract.parity_report import PART, OutputResult, ParityReport, SetVerdict
from modelship.contract.tensors import Tensors
from modelship.parity.batching import batch_size, run_in_batches
from modelship.parity.compare import compare_function
from modelship.parity.runner_protocol import Runner
from modelship.parity.tolerance import ToleranceConfig

DEFAULT_KIND = "logits"  # an output no task described (manifests written before tasks)


@dataclass
class RunResults:
    """What one runner gave on a list of input sets: one output set per input set it ran, in order; `error`
    (with the set's label) when it failed on the next one."""

    runner: str
    outputs: list[Tensors]
    seconds: float
    error: str | None = None


def run_sets(runner: Runner, input_sets: Sequence[Tensors], labels: Sequence[str]) -> RunResults:
    """`runner` on every input set, in chunks of its batch limit (`batching.run_in_batches`). Whatever it raises
    (it crashed, ONNX Runtime rejected the inputs, the server refused or did not answer) ends the run as its
    `error`, one line naming the set."""
    start = time.perf_counter()
    outputs: list[Tensors] = []
    for label, inputs in zip(labels, input_sets, strict=True):
        try:
            outputs.append(run_in_batches(runner, inputs))
        except Exception as exc:  # whatever a candidate raises is its verdict, not the end of the check
            return RunResults(runner.name, outputs, time.perf_counter() - start, f"{label}: {candidate_error(exc)}")
    return RunResults(runner.name, outputs, time.perf_counter() - start)


def reference_results(runner: Runner, input_sets: Sequence[Tensors]) -> RunResults:
    """The reference's outputs on every input set; what it raises propagates (nothing can be judged without it)."""
    start = time.perf_counter()
    outputs = [runner.run(inputs) for inputs in input_sets]
    return RunResults(runner.name, outputs, time.perf_counter() - start)


def compare_results(
    reference: RunResults,
    candidate: RunResults,
    input_sets: Sequence[Tensors],
    labels: Sequence[str],
    tolerance: ToleranceConfig,
    kinds: Mapping[str, str] | None = None,
) -> ParityReport:
    """Judge each of the reference's outputs against the candidate's, set by set, with the compare function of
    the output's kind (`kinds`: output name -> kind; DEFAULT_KIND for the others), then over every set."""
    if reference.error is not None:
        raise ModelshipError(f"the reference ({reference.runner}) failed: {reference.error}")
    kinds = kinds or {}
    per_output: dict[str, list[OutputResult]] = {}
    per_batch = []
    for label, expected, actual in zip(labels, reference.outputs, candidate.outputs, strict=False):
        judged = [name for name in expected if kinds.get(name) != PART and not name.startswith(REFERENCE_ONLY)]
        results = [_compare_one(name, expected, actual, tolerance, kinds) for name in judged]
        for result in results:
            per_output.setdefault(result.name, []).append(result)
        per_batch.append(SetVerdict(label, all(m.passed for m in results), results))
    outputs = [
        compare_function(kinds.get(name, DEFAULT_KIND)).aggregate(sets, tolerance.for_output(name))
        for name, sets in per_output.items()
    ]
    return ParityReport(
        reference=reference.runner,
        candidate=candidate.runner,
        batch_sizes=[batch_size(inputs) for inputs in input_sets],
        outputs=outputs,
        passed=candidate.error is None and all(m.passed for m in outputs),
        seconds=reference.seconds + candidate.seconds,
        tolerance=tolerance,
        per_batch=per_batch,
        error=candidate.error,
    )


def judge_runner(
    reference: RunResults,
    runner: Runner,
    input_sets: Sequence[Tensors],
    labels: Sequence[str],
    tolerance: ToleranceConfig,
    kinds: Mapping[str, str] | None = None,
) -> ParityReport:
    """`runner` on every input set (`run_sets`), judged against the reference's results (`compare_results`)."""
    return compare_results(reference, run_sets(runner, input_sets, labels), input_sets, labels, tolerance, kinds)


def compare_runners(
    reference: Runner,
    candidate: Runner,
    input_sets: Sequence[Tensors],
    tolerance: ToleranceConfig,
    *,
    labels: Sequence[str] | None = None,
    kinds: Mapping[str, str] | None = None,
) -> ParityReport:
    """Run both runners on every input set and judge the candidate (`reference_results`, then `judge_runner`)."""
    if not input_sets:
        raise ValueError("compare_runners needs at least one input set")
    labels = list(labels) if labels is not None else [f"#{i} batch {batch_size(s)}" for i, s in enumerate(input_sets)]
    return judge_runner(reference_results(reference, input_sets), candidate, input_sets, labels, tolerance, kinds)


def _compare_one(
    name: str, expected: Tensors, actual: Tensors, tolerance: ToleranceConfig, kinds: Mapping
) -> OutputResult:
    """Output `name` of one set judged by its kind's function (a joint one sees every output of the set)."""
    function = compare_function(kinds.get(name, DEFAULT_KIND))
    if function.joint:
        return function.compare(name, expected, actual, tolerance.for_output(name))
    candidate = actual.get(name)
    if candidate is None:
        return function.missing(name, np.asarray(expected[name]), "missing from the candidate's outputs")
    return function.compare(name, expected[name], candidate, tolerance.for_output(name))


def candidate_error(exc: Exception) -> str:
    """A candidate's failure as one line: a ModelshipError's message and hint, else the exception's type and text."""
    if isinstance(exc, ModelshipError):
        return str(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
