"""The INT8 variant's strategy: the graph it is quantized from, the recipes and their order, what is judged where, and
the figures recorded. The search itself (tries, the float set, shipping or declining) is export.int8_search's.

1. Recipes are measured, not assumed: for static INT8 both activation types (U8S8, the x86 VNNI fast path, and
   S8S8, ONNX Runtime's documented default) are quantized and timed on this CPU, and the faster is judged with
   per-channel and per-tensor weights (per-tensor was the closer on the demo's digits model), each in 7 bits and,
   where the variant may use full-range weights, also in 8 (see `weight_ranges`), the closest passing one kept; the
   other type only when none passes. For dynamic INT8 (a text model without --calibrate): per-tensor and
   per-channel weights, the faster first, the same way, quantized from export.int8_source's graph (a transformer's
   attention fused, normalization outputs smoothed: per-channel weights only).
2. Each is judged by the task's own compare function against eager fp32 on the held-back inputs
   (export.calibration), with the INT8 bars of contract.precisions.
3. When the verdict fails, the quantized nodes are ranked on inputs that are not the verdict's (calibration
   images, or the export's seeded random inputs): a dynamic recipe's by the noise each adds to the answer when
   quantized alone, a static one's by its own error against the fp32 graph (each alone would need a calibration).
4. The passing variant is timed against fp32 at batch 1 and at the largest verified batch. A variant that is not
   accurate enough after every try, or measured slower (unless --keep-slower), is declined in one line with its
   figures; the export writes its verified artifacts all the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx

from modelship.contract.artifact_details import Int8Details, Int8Try
from modelship.contract.cpu_kinds import CpuKind, this_cpu
from modelship.contract.errors import ExportError
from modelship.contract.iospec import IOSpec
from modelship.export.build import Build, Verification
from modelship.export.calibration import CalibrationSplit, image_split, text_split
from modelship.export.int8 import (
    SATURATION,
    WEIGHT_OPS,
    Int8Recipe,
    Quantized,
    name_nodes,
    node_errors,
    output_errors,
    prepare,
    quantize,
    seconds_per_run,
)
from modelship.export.int8_search import Judged, Ranking, Search, decline, search
from modelship.export.int8_source import Int8Source, dynamic_source
from modelship.export.text_inputs import served_batchings
from modelship.parity import OnnxRuntimeRunner, ParityReport, reference_results, reference_runner

CALIBRATION_VALUES = 64 * 3 * 224 * 224  # input values calibrated on at most: 64 ImageNet-sized images
STEP = "quantize onnx_int8"
Tensors = dict[str, np.ndarray]


@dataclass
class Int8Result:
    """The search's outcome, the variant's details, the held-back inputs it was judged on (with eager's outputs),
    and `declined`: why it is not written, else None."""

    search: Search
    details: Int8Details
    verification: Verification
    declined: str | None = None

    @property
    def report(self) -> ParityReport:
        assert self.search.chosen is not None and self.search.chosen.report is not None
        return self.search.chosen.report


def held_back(build: Build) -> tuple[CalibrationSplit | None, Verification]:
    """The calibration split (None: dynamic INT8 of a text model, which needs none) and the verification on the
    held-back inputs (eager fp32 outputs on them, compared by the task's kinds). Dynamic INT8 scales activations as
    it runs, so it is also judged on the batchings a server gives the same sentences: each alone, and all beside
    extreme texts (export.text_inputs.served_batchings)."""
    spec, io = build.spec, build.io
    calibrate = spec.calibration
    if build.tokenizer is not None:
        split = text_split(calibrate, build.tokenizer) if calibrate is not None else None
        if split is None:  # the export's real sentences: nothing was calibrated on them
            served, served_labels = served_batchings(build.tokenizer)
            sets = [build.verification.inputs[i] for i in build.verification.texts] + served
            labels = [build.verification.labels[i] for i in build.verification.texts] + served_labels
        else:
            sets, labels = split.judged, split.labels
    else:
        assert calibrate is not None  # export.calibration.check_calibration refused it before the export
        split = image_split(calibrate, build.preprocess, io)
        sets, labels = split.judged, split.labels
    eager = reference_results(reference_runner(build.model, io, name="eager"), sets)
    return split, Verification(sets, labels, eager, build.verification.kinds)


def weight_ranges(here: CpuKind, target: CpuKind, declared: bool) -> tuple[tuple[bool, ...], str]:
    """Which weight ranges are judged (reduce_range values: 7-bit always) for a variant judged on a `here` CPU and
    served on a `target` one (`declared` by --int8-cpu, else this CPU's kind), and why. Full-range weights are
    closer to fp32 where they do not saturate: judged for a VNNI target, and on an AVX2 CPU for any target (the
    verdict then includes the saturation, the worst case)."""
    made_for = f"made for {target.title} ({'--int8-cpu' if declared else 'this CPU, the default'})"
    if here is CpuKind.AVX2:
        note = "; the speed figures are this CPU's" if target is CpuKind.VNNI else ""
        return (True, False), (
            f"{SATURATION}. {made_for}: this CPU has no VNNI, so its verdicts include that saturation (the worst "
            f"case of any CPU), and full-range weights are judged beside 7-bit ones{note}"
        )
    if target is CpuKind.VNNI:
        return (True, False), (
            f"{SATURATION}. {made_for}: full-range weights are judged beside 7-bit ones; a full-range variant's "
            "verdict holds on VNNI CPUs only (--int8-cpu avx2 judges 7-bit weights alone)"
        )
    return (True,), (
        f"{SATURATION}. {made_for} on a VNNI CPU: only 7-bit weights are judged (a full-range verdict here would "
        "not hold there)"
    )


def build_int8(build: Build, fp32: Path, io: IOSpec, out: Path) -> Int8Result:
    """The INT8 variant of the fp32 graph at `fp32` written to `out` (see the module doc)."""
    split, verification = held_back(build)
    here = this_cpu()
    target = build.spec.int8_cpu or here
    ranges, weights_why = weight_ranges(here, target, declared=build.spec.int8_cpu is not None)
    why = [weights_why]
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
    written: list[Int8Recipe] = []  # the recipe whose graph is in `out` now
    tries = 0

    def write(recipe: Int8Recipe) -> None:
        written.clear()
        with build.steps(STEP, "onnx_int8"):
            quantize(prepared, out, recipe, calibration)
        written.append(recipe)

    def attempt(recipe: Int8Recipe) -> Judged:
        nonlocal tries
        tries += 1
        try:
            write(recipe)
        except ExportError as exc:
            build.steps.progress(STEP, f"try {tries}: {recipe.describe()}: the quantizer failed")
            record = Int8Try(recipe.describe(), False, [exc.message], len(verification.inputs), raised=True)
            return Judged(recipe, None, record)
        runner = OnnxRuntimeRunner(out, io, name="onnx_int8", isolated=False)
        try:
            with build.steps("verify onnx_int8", "onnx_int8"):
                report = verification.judge(runner, tolerance)
        finally:
            runner.close()
        verdict = "passes" if report.passed else f"fails ({', '.join(report.failures()[:1])})"
        build.steps.progress(STEP, f"try {tries}: {recipe.describe()}: {verdict}")
        return Judged(recipe, report, _try(recipe, report))

    def rank(judged: Judged) -> Ranking:
        if written != [judged.recipe]:
            write(judged.recipe)
        try:
            with build.steps("rank quantized nodes", "onnx_int8"):
                errors, measure = _node_ranking(Quantized(out, judged.recipe), prepared, ranking_sets)
        except Exception as exc:  # a diagnosis: without it the search only stops early
            raise ExportError(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        return Ranking(sorted(errors, key=lambda name: -errors[name]), errors, measure)

    speed_inputs = _speed_inputs(verification.inputs, io, max(build.spec.batch_sizes))
    with build.steps("time int8 recipes", "onnx_int8"):
        candidates = _ranked_recipes(prepared, fp32, out, calibration, speed_inputs, why, source.ops, source.smoothed)
    candidates, pair = _judged_recipes(candidates, ranges, build.spec.keep_slower, why)
    same_shapes = len({_shapes(c) for c in calibration}) == 1  # histograms of images of one size only
    done = search(candidates, pair, attempt, rank, percentile=same_shapes)
    why.extend(done.why)
    speedups: dict[str, float] = {}
    if done.passed:
        assert done.chosen is not None
        if written != [done.chosen.recipe]:  # the graph written last is not the one kept
            write(done.chosen.recipe)
        with build.steps("time onnx_int8 against fp32", "onnx_int8"):
            speedups = _speedups(fp32, out, speed_inputs)
    for scratch in (named, prepared, *source.files):
        scratch.unlink(missing_ok=True)
    chosen = done.chosen.recipe if done.chosen is not None else None
    details = Int8Details(
        recipe=chosen.describe() if chosen is not None else "",
        calibration=split.describe() if split else "none: dynamic quantization (weights only)",
        calibration_inputs=split.calibration_count if split else 0,
        judged_inputs=_rows(verification.inputs),
        kept_float=list(chosen.excluded) if chosen is not None else [],
        speedups=speedups,
        tries=done.tries,
        choices=why,
        target_cpu=target.value,
        judged_on=here.value,
        full_range_weights=chosen is not None and not chosen.reduce_range,
    )
    return Int8Result(done, details, verification, decline(done, speedups, build.spec.keep_slower))


def _judged_recipes(
    timed: list[tuple[float, Int8Recipe]], ranges: tuple[bool, ...], keep_slower: bool, why: list[str]
) -> tuple[list[Int8Recipe], int]:
    """The recipes judged, in order, and how many of the first are all judged (the closest passing kept): the
    faster's weights per-channel and (static) per-tensor, in each weight range judged, then the others, except
    those measured slower than fp32 (they could not ship: their tries go to keeping nodes float instead)."""
    fastest = timed[0][1]
    first = [fastest] + ([replace(fastest, per_channel=False)] if fastest.mode == "static" else [])
    first = [replace(recipe, reduce_range=r) for r in ranges for recipe in first]
    slower = [(ratio, recipe) for ratio, recipe in timed[1:] if 0 < ratio < 1 and not keep_slower]
    if slower:
        shown = ", ".join(f"{_timed_part(r)} ({ratio:.2f}x)" for ratio, r in slower)
        why.append(f"not judged, slower than fp32 here: {shown} (--keep-slower judges it)")
    return [*first, *(r for ratio, r in timed[1:] if (ratio, r) not in slower)], len(first)


def _timed_part(recipe: Int8Recipe) -> str:
    """The part of a recipe's description the timed recipes differ in: static activations, dynamic weights."""
    return recipe.describe().split(", ")[0 if recipe.mode == "static" else 2]


def _ranked_recipes(
    source: Path,
    fp32: Path,
    out: Path,
    calibration: Sequence[Tensors],
    speed_inputs: dict[int, Tensors],
    why: list[str],
    ops: tuple[str, ...],
    smoothed: bool,
) -> list[tuple[float, Int8Recipe]]:
    """Both recipes of the mode for the op types `ops` with their speed against the fp32 artifact at the largest
    batch (0: the quantizer failed on it), the faster on this CPU first (each quantized from `source`)."""
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
    timed: list[tuple[float, Int8Recipe]] = []
    for recipe in options:
        try:
            quantize(source, out, recipe, calibration)
        except ExportError:  # judged last, where it counts as a failed try
            timed.append((0.0, recipe))
            continue
        timed.append((baseline / seconds_per_run(out, speed_inputs[batch]), recipe))
    timed.sort(key=lambda pair: -pair[0])
    figures = ", ".join(f"{_timed_part(r)} " + (f"{s:.2f}x" if s else "failed to quantize") for s, r in timed)
    first = "; the faster is judged first" if len(timed) > 1 else ""
    why.append(f"{what} timed against fp32 at batch {batch}: {figures}{first}")
    return timed


def _node_ranking(quantized: Quantized, source: Path, sets: Sequence[Tensors]) -> tuple[dict[str, float], str]:
    """Each quantized node's error, and what it measures: the noise it adds to the answer quantized alone (dynamic
    recipes), or its own error (static ones, where each alone would need its own calibration)."""
    recipe = quantized.recipe
    if recipe.mode == "dynamic":
        errors = output_errors(source, quantized.path, recipe, sets, source.with_name("int8-alone.onnx"))
        return errors, "the noise each adds to the answer quantized alone"
    return node_errors(source, quantized.path, sets, recipe.ops), "their own error against fp32"


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
