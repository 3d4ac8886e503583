"""The INT8 strategy, in one place: which recipe, which nodes stay float, and whether the variant ships.

1. Recipes are measured, not assumed: for static INT8 both activation types (U8S8, the x86 VNNI fast path, and
   S8S8, ONNX Runtime's documented default) are quantized and timed on this CPU, and the faster is judged with
   per-channel and per-tensor weights (per-tensor was the closer on the demo's digits model), each in 7 bits and,
   on a CPU without VNNI, also full-range (int8.SATURATION: there the verdict includes the saturation), the closest
   passing one kept; the other type only when none passes. For dynamic INT8 (a text model without --calibrate):
   per-tensor and per-channel weights, the faster first, the same way, quantized from export.int8_source's graph
   (a transformer's attention fused, normalization outputs smoothed: per-channel weights only). The closest of them
   is the one refined.
2. Each is judged by the task's own compare function against eager fp32 on the held-back inputs
   (export.calibration), with the INT8 bars of contract.precisions.
3. When the verdict fails, the quantized nodes are ranked on inputs that are not the verdict's (calibration
   images, or the export's seeded random inputs): a dynamic recipe's by the noise each adds to the answer when
   quantized alone, a static one's by its own error against the fp32 graph (each alone would need a calibration).
   The worst are kept float, 1, 2, 3, 4, 6, 9, ... of them, at most INT8_TRIALS quantizations in all, each shown as
   progress. Static recipes try percentile calibration once before that.
4. The passing variant is timed against fp32 at batch 1 and at the largest verified batch. Not faster at either:
   not written (unless --keep-slower), and the export says by how much it lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx

from modelship.contract.artifact_details import Int8Details, Int8Try
from modelship.contract.iospec import IOSpec
from modelship.export.build import Build, Verification
from modelship.export.calibration import CalibrationSplit, image_split, text_split
from modelship.export.int8 import (
    SATURATION,
    WEIGHT_OPS,
    Int8Recipe,
    Quantized,
    cpu_has_vnni,
    name_nodes,
    node_errors,
    output_errors,
    prepare,
    quantize,
    seconds_per_run,
)
from modelship.export.int8_source import Int8Source, dynamic_source
from modelship.parity import OnnxRuntimeRunner, ParityReport, reference_results, reference_runner

INT8_TRIALS = 8  # quantizations tried in all (each is a calibration and a verdict on the held-back inputs)
MAX_FLOAT_SHARE = 0.5  # of the quantized nodes, at most this share is kept float
CALIBRATION_VALUES = 64 * 3 * 224 * 224  # input values calibrated on at most: 64 ImageNet-sized images
STEP = "quantize onnx_int8"
Tensors = dict[str, np.ndarray]


@dataclass
class Int8Result:
    """The variant's verdict, its details, the held-back inputs it was judged on (with eager's outputs), and
    `declined`: why it is not written (slower than fp32), else None."""

    report: ParityReport
    details: Int8Details
    verification: Verification
    declined: str | None = None


Attempt = Callable[[Int8Recipe], tuple[Quantized, ParityReport]]


def held_back(build: Build) -> tuple[CalibrationSplit | None, Verification]:
    """The calibration split (None: dynamic INT8 of a text model, which needs none) and the verification on the
    held-back inputs (eager fp32 outputs on them, compared by the task's kinds)."""
    spec, io = build.spec, build.io
    calibrate = spec.calibration
    if build.tokenizer is not None:
        split = text_split(calibrate, build.tokenizer) if calibrate is not None else None
        if split is None:  # the export's real sentences: nothing was calibrated on them
            sets = [build.verification.inputs[i] for i in build.verification.texts]
            labels = [build.verification.labels[i] for i in build.verification.texts]
        else:
            sets, labels = split.judged, split.labels
    else:
        assert calibrate is not None  # export.calibration.check_calibration refused it before the export
        split = image_split(calibrate, build.preprocess, io)
        sets, labels = split.judged, split.labels
    eager = reference_results(reference_runner(build.model, io, name="eager"), sets)
    return split, Verification(sets, labels, eager, build.verification.kinds)


def build_int8(build: Build, fp32: Path, io: IOSpec, out: Path) -> Int8Result:
    """The INT8 variant of the fp32 graph at `fp32` written to `out` (see the module doc)."""
    split, verification = held_back(build)
    vnni = cpu_has_vnni()
    why = [
        f"{SATURATION}: this CPU has VNNI, so only 7-bit weights are judged (a full-range verdict here would not hold "
        "on a CPU without)"
        if vnni
        else f"{SATURATION}: this CPU has no VNNI, so its verdicts include that saturation (the worst case of any "
        "CPU), and full-range weights are judged beside 7-bit ones"
    ]
    tolerance = build.spec.tolerance("int8")
    source = dynamic_source(build, fp32, io) if split is None else Int8Source(fp32, WEIGHT_OPS)
    why.extend(source.why)
    model = onnx.load(str(source.path))
    name_nodes(model)
    named = out.with_name("int8-source.onnx")
    onnx.save(model, str(named))
    prepared = prepare(named, out.with_name("int8-prepared.onnx"))
    calibration = _within_budget(split.calibration) if split is not None else []
    if split is not None and len(calibration) < len(split.calibration):
        why.append(
            f"calibrated on the first {_rows(calibration)} of {split.calibration_count} calibration inputs: ONNX "
            f"Runtime's calibrators hold every activation of every input at once ({CALIBRATION_VALUES:,} input "
            "values at most)"
        )
    ranking_sets = calibration or build.verification.random_sets
    tries: list[Int8Try] = []
    last: list[Int8Recipe] = []  # the recipe whose graph is in `out` now

    def attempt(recipe: Int8Recipe) -> tuple[Quantized, ParityReport]:
        with build.steps(STEP, "onnx_int8"):
            quantized = quantize(prepared, out, recipe, calibration)
        last[:] = [recipe]
        runner = OnnxRuntimeRunner(out, io, name="onnx_int8", isolated=False)
        try:
            with build.steps("verify onnx_int8", "onnx_int8"):
                report = verification.judge(runner, tolerance)
        finally:
            runner.close()
        verdict = "passes" if report.passed else f"fails ({', '.join(report.failures()[:1])})"
        build.steps.progress(STEP, f"try {len(tries) + 1}/{INT8_TRIALS}: {recipe.describe()}: {verdict}")
        tries.append(_try(recipe, report))
        return quantized, report

    speed_inputs = _speed_inputs(verification.inputs, io, max(build.spec.batch_sizes))
    with build.steps("time int8 recipes", "onnx_int8"):
        candidates = _ranked_recipes(prepared, fp32, out, calibration, speed_inputs, why, source.ops, source.smoothed)
    pair = 1  # the first recipes all judged, the closest passing kept
    if candidates[0].mode == "static":  # per-tensor weights of the faster: per-channel is not always closer
        candidates.insert(1, replace(candidates[0], per_channel=False))
        pair = 2
    if not vnni:  # full-range weights are closer where they do not saturate, and this CPU shows where they do
        candidates[pair:pair] = [replace(recipe, reduce_range=False) for recipe in candidates[:pair]]
        pair *= 2
    judged = []
    for recipe in candidates:  # the base recipes, the faster first, until one passes
        judged.append(attempt(recipe))
        if len(judged) >= pair and any(report.passed for _, report in judged):
            break
    quantized, report = min(judged, key=lambda pair: _try(pair[0].recipe, pair[1]).closeness())
    if not report.passed and quantized.recipe.mode == "static" and len({_shapes(c) for c in calibration}) == 1:
        # histograms need one shape: ONNX Runtime's collector stacks them (images of their own sizes do not)
        quantized, report = attempt(replace(quantized.recipe, method="percentile"))
        if report.passed:
            why.append("percentile calibration (99.999%): minmax ranges left the verdict failing")
    if not report.passed:
        with build.steps("rank quantized nodes", "onnx_int8"):
            errors, measure = _node_ranking(quantized, prepared, ranking_sets)
        quantized, report = _keep_worst_float(quantized, report, errors, measure, attempt, tries, why)
    if last != [quantized.recipe]:  # the graph written last is not the one kept
        quantize(prepared, out, quantized.recipe, calibration)
    with build.steps("time onnx_int8 against fp32", "onnx_int8"):
        speedups = _speedups(fp32, out, speed_inputs)
    for scratch in (named, prepared, *source.files):
        scratch.unlink(missing_ok=True)
    details = Int8Details(
        recipe=quantized.recipe.describe(),
        calibration=split.describe() if split else "none: dynamic quantization (weights only)",
        calibration_inputs=split.calibration_count if split else 0,
        judged_inputs=_rows(verification.inputs),
        kept_float=list(quantized.recipe.excluded),
        speedups=speedups,
        tries=tries,
        choices=why,
    )
    slower = {batch: ratio for batch, ratio in speedups.items() if ratio < 1.0}
    declined = None
    if slower and report.passed and not build.spec.keep_slower:
        lost = ", ".join(f"{ratio:.2f}x fp32 at {batch}" for batch, ratio in slower.items())
        declined = f"onnx_int8 not written: slower than fp32 on this CPU ({lost}); --keep-slower writes it anyway"
    return Int8Result(report, details, verification, declined)


def _ranked_recipes(
    source: Path,
    fp32: Path,
    out: Path,
    calibration: Sequence[Tensors],
    speed_inputs: dict[int, Tensors],
    why: list[str],
    ops: tuple[str, ...],
    smoothed: bool,
) -> list[Int8Recipe]:
    """Both recipes of the mode for the op types `ops`, the faster on this CPU first (each quantized from `source`
    and timed against the fp32 artifact at the largest batch)."""
    if not calibration:
        options = [
            Int8Recipe(mode="dynamic", per_channel=pc, ops=ops) for pc in ((True,) if smoothed else (False, True))
        ]
        what = (
            "per-channel weights only (smoothing moved outliers into them)"
            if smoothed
            else "per-tensor and per-channel weights"
        )
    else:
        options = [Int8Recipe(activations="uint8", ops=ops), Int8Recipe(activations="int8", ops=ops)]
        what = "U8S8 and S8S8"
    batch = max(speed_inputs)
    baseline = seconds_per_run(fp32, speed_inputs[batch])
    timed = []
    for recipe in options:
        quantize(source, out, recipe, calibration)
        timed.append((baseline / seconds_per_run(out, speed_inputs[batch]), recipe))
    timed.sort(key=lambda pair: -pair[0])
    figures = ", ".join(f"{r.describe().split(', ')[0 if r.mode == 'static' else 1]} {s:.2f}x" for s, r in timed)
    first = "; the faster is judged first" if len(timed) > 1 else ""
    why.append(f"{what} timed against fp32 at batch {batch}: {figures}{first}")
    return [recipe for _, recipe in timed]


def _node_ranking(quantized: Quantized, source: Path, sets: Sequence[Tensors]) -> tuple[dict[str, float], str]:
    """Each quantized node's error, and what it measures: the noise it adds to the answer quantized alone (dynamic
    recipes), or its own error (static ones, where each alone would need its own calibration)."""
    recipe = quantized.recipe
    if recipe.mode == "dynamic":
        errors = output_errors(source, quantized.path, recipe, sets, source.with_name("int8-alone.onnx"))
        return errors, "the noise each adds to the answer quantized alone"
    return node_errors(source, quantized.path, sets, recipe.ops), "their own error against fp32"


def _keep_worst_float(
    quantized: Quantized,
    report: ParityReport,
    errors: dict[str, float],
    measure: str,
    attempt: Attempt,
    tries: list[Int8Try],
    why: list[str],
) -> tuple[Quantized, ParityReport]:
    """Keep the nodes with the worst `errors` float, 1, 2, 3, 4, 6, 9, ... of them (never more than MAX_FLOAT_SHARE
    of the quantized nodes: past that it is no INT8 model), until the verdict passes or the tries run out; the last
    result."""
    recipe = quantized.recipe
    ranked = [name for name, _ in sorted(errors.items(), key=lambda item: -item[1]) if name not in recipe.excluded]
    ranked = ranked[: int(len(errors) * MAX_FLOAT_SHARE)]
    count = 1
    while not report.passed and len(tries) < INT8_TRIALS and ranked:
        chosen = ranked[:count]
        quantized, report = attempt(recipe.excluding(chosen))
        if report.passed:
            why.append(
                f"{len(chosen)} nodes kept float, the worst by {measure} "
                f"({', '.join(f'{n} adds {_db(errors[n])}' for n in chosen[:3])}{', ...' if len(chosen) > 3 else ''})"
            )
        if count >= len(ranked):
            break
        count = min(max(count + 1, count * 3 // 2), len(ranked))
    return quantized, report


def _speed_inputs(sets: Sequence[Tensors], io: IOSpec, largest: int) -> dict[int, Tensors]:
    """One input of 1 row and one of `largest` rows (rows of the held-back sets, repeated when there are fewer);
    a single-row graph is timed at 1 row only."""
    first = sets[0]
    batches = [1] if io.max_rows == 1 or not io.batched else sorted({1, largest})
    same = [s for s in sets if all(s[k].shape[1:] == v.shape[1:] for k, v in first.items())]
    rows = {k: np.concatenate([s[k] for s in same]) for k in first}
    count = len(next(iter(rows.values())))
    return {b: {k: np.take(v, np.arange(b) % count, axis=0) for k, v in rows.items()} for b in batches}


def _speedups(fp32: Path, int8: Path, inputs: dict[int, Tensors]) -> dict[str, float]:
    """fp32 time / INT8 time at each batch, measured side by side."""
    return {
        f"batch {batch}": round(seconds_per_run(fp32, feed) / seconds_per_run(int8, feed), 3)
        for batch, feed in inputs.items()
    }


def _db(share: float) -> str:
    """Noise added, as a share of the signal's power, in dB."""
    return f"noise at {10 * np.log10(share):.0f} dB" if share > 0 else "no noise"


def _shapes(inputs: Tensors) -> tuple[tuple[int, ...], ...]:
    return tuple(array.shape[1:] for array in inputs.values())


def _within_budget(sets: Sequence[Tensors]) -> list[Tensors]:
    """The calibration sets, in order, while their input values stay within CALIBRATION_VALUES (at least one):
    a segmenter's full-size photos kept every activation of 160 of them and were killed at 24 GB."""
    chosen: list[Tensors] = []
    total = 0
    for inputs in sets:
        total += sum(array.size for array in inputs.values())
        if chosen and total > CALIBRATION_VALUES:
            break
        chosen.append(inputs)
    return chosen


def _try(recipe: Int8Recipe, report: ParityReport) -> Int8Try:
    """A try's record: its verdict, how many sets it failed, and its outputs' lowest top-1 agreement and cosine (how
    close it came)."""
    rows = report.per_batch or []
    failing = sum(not row.passed for row in rows) if rows else int(not report.passed)

    def lowest(figure: str) -> float | None:
        values = [value for o in report.outputs if isinstance(value := getattr(o, figure, None), float)]
        return min(values, default=None)

    return Int8Try(
        recipe.describe(), report.passed, report.failures()[:2], failing, lowest("cosine"), lowest("top1_agreement")
    )


def _rows(sets: Sequence[Tensors]) -> int:
    return sum(len(next(iter(s.values()))) for s in sets)
