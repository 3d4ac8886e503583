"""The INT8 variant for one export: its held-back verification, the graph it is quantized from, the base recipes
timed on this CPU, and the oracle the planner (planner.py) asks to quantize, judge, rank and time. Every decision is
the planner's; this module does the work.

- Held back: the calibration split (planner inputs never judged on what set the ranges) or, for a text model's
  dynamic INT8, the export's own sentences and the batchings a server gives them (each alone, beside extreme texts).
- Recipes are measured, not assumed: static INT8 times both activation types (U8S8, the x86 VNNI fast path, and
  S8S8, ONNX Runtime's documented default), dynamic INT8 per-tensor and per-channel weights (per-channel only on a
  smoothed graph), each quantized from the prepared graph and timed against the fp32 artifact; the weight ranges
  judged follow the CPU it will be served on (`weight_ranges`).
- Judged by the task's own compare function against eager fp32 with the INT8 bars of contract.precisions; nodes
  ranked on inputs that are not the verdict's (calibration inputs, or the export's seeded ones): a dynamic recipe's
  by the noise each adds to the answer quantized alone, a static one's by its own error against fp32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from modelship.contract.artifact_details import Int8Details, Int8Try
from modelship.contract.cpu_kinds import CpuKind, this_cpu
from modelship.contract.errors import ExportError
from modelship.contract.iospec import IOSpec
from modelship.contract.tensors import Tensors
from modelship.export.build import Build, Verification
from modelship.export.precision.int8.calibration import CalibrationSplit, image_split, text_split
from modelship.export.precision.int8.options import Int8Options
from modelship.export.precision.int8.planner import Judged, Plan, Ranking, Timed, plan, timed_part
from modelship.export.precision.int8.quantize import prepare, quantize
from modelship.export.precision.int8.ranking import node_errors, output_errors
from modelship.export.precision.int8.recipe import SATURATION, WEIGHT_OPS, Activations, Int8Recipe, Mode
from modelship.export.precision.int8.source import Int8Source, dynamic_source
from modelship.export.precision.int8.speed import seconds_per_run, speed_inputs, speedups
from modelship.export.text_inputs import served_batchings
from modelship.parity import OnnxRuntimeRunner, ParityReport, reference_results, reference_runner
from modelship.parity.onnx_graph import name_nodes

CALIBRATION_VALUES = 64 * 3 * 224 * 224  # input values calibrated on at most: 64 ImageNet-sized images
STEP = "quantize onnx_int8"


@dataclass
class Int8Result:
    """The planner's decisions, the variant's details and the held-back inputs it was judged on (with eager's
    outputs)."""

    plan: Plan
    details: Int8Details
    verification: Verification

    @property
    def declined(self) -> str | None:
        return self.plan.declined

    @property
    def report(self) -> ParityReport:
        assert self.plan.chosen is not None and self.plan.chosen.report is not None
        return self.plan.chosen.report


@dataclass
class _Graphs:
    """The graphs one INT8 export works on: the source (fp32 artifact or the fused, smoothed one), the named and
    prepared copies quantized from, where each try is written (`out`), the calibration sets and the choices made."""

    fp32: Path
    out: Path
    source: Int8Source
    named: Path
    prepared: Path
    calibration: list[Tensors]
    why: list[str] = field(default_factory=list)

    def clean(self) -> None:
        for scratch in (self.named, self.prepared, *self.source.files):
            scratch.unlink(missing_ok=True)


def build_int8(build: Build, fp32: Path, io: IOSpec, out: Path) -> Int8Result:
    """The INT8 variant of the fp32 graph at `fp32`, tried in `out` (see the module doc)."""
    options = build.spec.options_for(Int8Options)
    split, verification = held_back(build, options)
    here = this_cpu()
    ranges, weights_why = weight_ranges(here, options.cpu or here, declared=options.cpu is not None)
    graphs = _prepare(build, fp32, io, out, split, [weights_why])
    oracle = _Oracle(
        build, graphs, verification, io, speed_inputs(verification.inputs, io, max(build.spec.batch_sizes))
    )
    with build.steps("time int8 recipes", "onnx_int8"):
        timed = _time_recipes(graphs, oracle.speed_inputs)
    same_shapes = len({_shapes(c) for c in graphs.calibration}) == 1  # histograms of images of one size only
    decided = plan(timed, ranges, oracle, keep_slower=options.keep_slower, percentile=same_shapes)
    graphs.clean()
    chosen = decided.chosen.recipe if decided.chosen is not None else None
    details = Int8Details(
        recipe=chosen.describe() if chosen is not None else "",
        calibration=split.describe() if split else "none: dynamic quantization (weights only)",
        calibration_inputs=split.calibration_count if split else 0,
        judged_inputs=_rows(verification.inputs),
        kept_float=list(chosen.excluded) if chosen is not None else [],
        speedups=decided.speedups,
        tries=decided.tries,
        choices=graphs.why + decided.why,
        target_cpu=(options.cpu or here).value,
        judged_on=here.value,
        full_range_weights=chosen is not None and not chosen.reduce_range,
    )
    return Int8Result(decided, details, verification)


def held_back(build: Build, options: Int8Options) -> tuple[CalibrationSplit | None, Verification]:
    """The calibration split (None: dynamic INT8 of a text model, which needs none) and the verification on the
    held-back inputs (eager fp32 outputs on them, compared by the task's kinds). Dynamic INT8 scales activations as
    it runs, so it is also judged on the batchings a server gives the same sentences: each alone, and all beside
    extreme texts (export.text_inputs.served_batchings)."""
    calibrate, io = options.calibrate, build.io
    if build.tokenizer is not None:
        split = text_split(calibrate, build.tokenizer) if calibrate is not None else None
        if split is None:  # the export's real sentences: nothing was calibrated on them
            served, served_labels = served_batchings(build.tokenizer)
            sets = [build.verification.inputs[i] for i in build.verification.texts] + served
            labels = [build.verification.labels[i] for i in build.verification.texts] + served_labels
        else:
            sets, labels = split.judged, split.labels
    else:
        assert calibrate is not None  # calibration.check_calibration refused it before the export
        split = image_split(calibrate, build.preprocess, io)
        sets, labels = split.judged, split.labels
    eager = reference_results(reference_runner(build.model, io, name="eager"), sets)
    return split, Verification(sets, labels, eager, build.verification.kinds)


def weight_ranges(here: CpuKind, target: CpuKind, declared: bool) -> tuple[tuple[bool, ...], str]:
    """Which weight ranges are judged (reduce_range values: 7-bit always) for a variant judged on a `here` CPU and
    served on a `target` one (`declared` by --int8-cpu, else this CPU's kind), and why. Full-range weights are
    closer to fp32 where they do not saturate: judged for a VNNI target, and on an AVX2 CPU for any target (the
    verdict then includes the saturation, the worst case)."""
    made_for = f"made for {target.description} ({'--int8-cpu' if declared else 'this CPU, the default'})"
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


def _prepare(
    build: Build, fp32: Path, io: IOSpec, out: Path, split: CalibrationSplit | None, why: list[str]
) -> _Graphs:
    """The source graph (a dynamic one fused and smoothed), its nodes named, ONNX Runtime's pre-processing, and the
    calibration sets within what its calibrators can hold."""
    source = dynamic_source(build, fp32, io) if split is None else Int8Source(fp32, WEIGHT_OPS)
    model = onnx.load(str(source.path))
    name_nodes(model)
    named = out.with_name("int8-source.onnx")
    onnx.save(model, str(named))
    prepared = prepare(named, out.with_name("int8-prepared.onnx"))
    calibration = _within_budget(split.calibration) if split is not None else []
    why = [*why, *source.why]
    if split is not None and len(calibration) < len(split.calibration):
        why.append(
            f"calibrated on the first {_rows(calibration)} of {split.calibration_count} calibration inputs: ONNX "
            f"Runtime's calibrators hold every activation of every input at once ({CALIBRATION_VALUES:,} input "
            "values at most)"
        )
    return _Graphs(fp32, out, source, named, prepared, calibration, why)


class _Oracle:
    """What the planner asks of one export (planner.Oracle): each try quantized into `out` and judged on the
    held-back inputs, the quantized nodes ranked, a passing recipe timed against fp32; progress shown per try."""

    def __init__(
        self, build: Build, graphs: _Graphs, verification: Verification, io: IOSpec, inputs: dict[int, Tensors]
    ) -> None:
        self.build, self.graphs, self.verification, self.io = build, graphs, verification, io
        self.speed_inputs = inputs
        self.tolerance = build.spec.tolerance("int8")
        self.written: Int8Recipe | None = None  # the recipe whose graph is in `out` now
        self.tries = 0

    def write(self, recipe: Int8Recipe) -> None:
        self.written = None
        with self.build.steps(STEP, "onnx_int8"):
            quantize(self.graphs.prepared, self.graphs.out, recipe, self.graphs.calibration)
        self.written = recipe

    def attempt(self, recipe: Int8Recipe) -> Judged:
        self.tries += 1
        try:
            self.write(recipe)
        except ExportError as exc:
            self.build.steps.progress(STEP, f"try {self.tries}: {recipe.describe()}: the quantizer failed")
            record = Int8Try(recipe.describe(), False, [exc.message], len(self.verification.inputs), raised=True)
            return Judged(recipe, None, record)
        runner = OnnxRuntimeRunner(self.graphs.out, self.io, name="onnx_int8", isolated=False)
        try:
            with self.build.steps("verify onnx_int8", "onnx_int8"):
                report = self.verification.judge(runner, self.tolerance)
        finally:
            runner.close()
        verdict = "passes" if report.passed else f"fails ({', '.join(report.failures()[:1])})"
        self.build.steps.progress(STEP, f"try {self.tries}: {recipe.describe()}: {verdict}")
        return Judged(recipe, report, _try(recipe, report))

    def rank(self, judged: Judged) -> Ranking:
        recipe, graphs = judged.recipe, self.graphs
        if self.written != recipe:
            self.write(recipe)
        try:
            with self.build.steps("rank quantized nodes", "onnx_int8"):
                if recipe.mode is Mode.DYNAMIC:
                    scratch = graphs.prepared.with_name("int8-alone.onnx")
                    errors = output_errors(graphs.prepared, graphs.out, recipe, self._ranking_sets(), scratch)
                    measure = "the noise each adds to the answer quantized alone"
                else:
                    errors = node_errors(graphs.prepared, graphs.out, self._ranking_sets(), recipe.ops)
                    measure = "their own error against fp32"
        except Exception as exc:  # a diagnosis: without it the search only stops early
            raise ExportError(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        return Ranking(sorted(errors, key=lambda name: -errors[name]), errors, measure)

    def time(self, recipe: Int8Recipe) -> dict[str, float]:
        if self.written != recipe:  # the graph written last is not the one kept
            self.write(recipe)
        with self.build.steps("time onnx_int8 against fp32", "onnx_int8"):
            return speedups(self.graphs.fp32, self.graphs.out, self.speed_inputs)

    def _ranking_sets(self) -> list[Tensors]:
        return self.graphs.calibration or self.build.verification.random_sets


def _time_recipes(graphs: _Graphs, inputs: dict[int, Tensors]) -> list[Timed]:
    """The base recipes of the mode with their speed against the fp32 artifact at the largest batch (0: the
    quantizer failed on it), the fastest first."""
    ops, calibration = graphs.source.ops, graphs.calibration
    if not calibration:
        weights = (True,) if graphs.source.smoothed else (False, True)
        options = [Int8Recipe(mode=Mode.DYNAMIC, per_channel=pc, ops=ops) for pc in weights]
        what = "per-channel weights only (smoothing moved outliers into them)" if graphs.source.smoothed else (
            "per-tensor and per-channel weights")  # fmt: skip
    else:
        options = [Int8Recipe(activations=kind, ops=ops) for kind in (Activations.UINT8, Activations.INT8)]
        what = "U8S8 and S8S8"
    batch = max(inputs)
    baseline = seconds_per_run(graphs.fp32, inputs[batch])
    timed: list[Timed] = []
    for recipe in options:
        try:
            quantize(graphs.prepared, graphs.out, recipe, calibration)
        except ExportError:  # judged last, where it counts as a failed try
            timed.append(Timed(recipe, 0.0))
            continue
        timed.append(Timed(recipe, baseline / seconds_per_run(graphs.out, inputs[batch])))
    timed.sort(key=lambda t: -t.ratio)
    figures = ", ".join(
        f"{timed_part(t.recipe)} " + (f"{t.ratio:.2f}x" if t.ratio else "failed to quantize") for t in timed
    )
    first = "; the faster is judged first" if len(timed) > 1 else ""
    graphs.why.append(f"{what} timed against fp32 at batch {batch}: {figures}{first}")
    return timed


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
