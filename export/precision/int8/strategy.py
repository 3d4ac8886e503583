"""The INT8 variant for one export: its held-back verification, the graph it is quantized from, the base recipes
timed on this CPU, and the oracle the planner (planner.py) asks to quantize, judge, rank and time. Every decision is
the planner's; this module does the work.

- Held back: the calibration split (planner inputs never judged on what set the ranges; `--holdout` inputs when
  given) or, for a text model's dynamic INT8, the export's own sentences and the batchings a server gives them
  (each alone, beside extreme texts).
- Recipes are measured, not assumed: static INT8 quantizes the op set ONNX Runtime fuses in this graph
  (export.precision.int8.opset) or the weight ops alone, with both activation types (U8S8, the x86 VNNI fast path,
  and S8S8, ONNX Runtime's documented default), each timed against the fp32 artifact side by side and the Q/DQ
  pairs it leaves counted; dynamic INT8 per-tensor and per-channel weights (per-channel only on a smoothed graph).
  Static ranges are calibrated once per kind (export.precision.int8.ranges); the weight ranges judged follow the
  CPU it will be served on (`weight_ranges`).
- Judged by the task's own compare function against eager fp32 with the INT8 bars of contract.precisions, each try
  timed against fp32 and its agreement given with its interval; nodes ranked on inputs that are not the verdict's
  (calibration inputs, or the export's seeded ones): a dynamic recipe's by the noise each adds to the answer
  quantized alone, a static one's by what keeping each float removes from the answer, against its share of the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from modelship.contract.artifact_details import Int8Details, Int8Try
from modelship.contract.confidence import Agreement, wilson
from modelship.contract.cpu_kinds import CpuKind, this_cpu
from modelship.contract.errors import ExportError
from modelship.contract.iospec import IOSpec
from modelship.contract.tensors import Tensors
from modelship.export.build import Build, Verification
from modelship.export.precision.int8.calibration import HOLD_OUT, CalibrationSplit, image_split, text_split
from modelship.export.precision.int8.opset import Optimised, fused_ops, optimised
from modelship.export.precision.int8.options import Int8Options
from modelship.export.precision.int8.planner import Judged, Plan, Ranking, Timed, plan, timed_part
from modelship.export.precision.int8.quantize import prepare, quantize
from modelship.export.precision.int8.ranges import Ranges
from modelship.export.precision.int8.ranking import RANKING_SETS, output_errors, revert_gains, work_shares
from modelship.export.precision.int8.recipe import SATURATION, WEIGHT_OPS, Activations, Int8Recipe, Mode
from modelship.export.precision.int8.source import Int8Source, dynamic_source
from modelship.export.precision.int8.speed import seconds_per_run, speed_inputs, speedups
from modelship.export.text_inputs import served_batchings
from modelship.parity import OnnxRuntimeRunner, ParityReport, reference_results, reference_runner
from modelship.parity.onnx_graph import name_nodes

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
    prepared copies quantized from, where each try is written (`out`), the calibration sets, their ranges (static:
    calibrated once per kind, export.precision.int8.ranges) and the choices made."""

    fp32: Path
    out: Path
    source: Int8Source
    named: Path
    prepared: Path
    calibration: list[Tensors]
    ranges: Ranges
    why: list[str] = field(default_factory=list)

    def clean(self) -> None:
        self.ranges.clean()
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
    try:
        with build.steps("time int8 recipes", "onnx_int8"):
            timed = _time_recipes(graphs, oracle)
        decided = plan(timed, ranges, oracle, keep_slower=options.keep_slower, percentile=bool(graphs.calibration))
        counted = oracle.optimised(decided.chosen.recipe) if decided.passed and decided.chosen is not None else None
    finally:
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
        quantized_ops=list(chosen.ops) if chosen is not None else [],
        qdq_pairs_left=counted.pairs_left if counted is not None else None,
        integer_ops=counted.integer_ops if counted is not None else None,
        confidence=_confidence(decided, oracle, split is not None and split.holdout),
    )
    return Int8Result(decided, details, verification)


def _confidence(decided: Plan, oracle: _Oracle, holdout: bool) -> str:
    """One line when the held-back inputs cannot tell the bar from a value 0.05 below it (contract.confidence)."""
    record, bar = decided.chosen.record if decided.chosen is not None else None, oracle.tolerance.default.min_top1
    if record is None or record.top1_agreement is None or bar is None or not record.judged:
        return ""
    more = "a larger --holdout DIR" if holdout else f"--holdout DIR, or {HOLD_OUT}x as many to --calibrate"
    warning = Agreement(record.top1_agreement, record.judged, bar).warning("held-back inputs", more)
    return warning or ""


def held_back(build: Build, options: Int8Options) -> tuple[CalibrationSplit | None, Verification]:
    """The calibration split (None: dynamic INT8 of a text model, which needs none) and the verification on the
    held-back inputs (eager fp32 outputs on them, compared by the task's kinds). Dynamic INT8 scales activations as
    it runs, so it is also judged on the batchings a server gives the same sentences: each alone, and all beside
    extreme texts (export.text_inputs.served_batchings)."""
    calibrate, io = options.calibrate, build.io
    if build.tokenizer is not None:
        split = text_split(calibrate, build.tokenizer, options.holdout) if calibrate is not None else None
        if split is None:  # the export's real sentences: nothing was calibrated on them
            served, served_labels = served_batchings(build.tokenizer)
            sets = [build.verification.inputs[i] for i in build.verification.texts] + served
            labels = [build.verification.labels[i] for i in build.verification.texts] + served_labels
        else:
            sets, labels = split.judged, split.labels
    else:
        assert calibrate is not None  # calibration.check_calibration refused it before the export
        split = image_split(calibrate, build.preprocess, io, options.holdout)
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
    calibration sets with their ranges (calibrated on first use)."""
    source = dynamic_source(build, fp32, io) if split is None else Int8Source(fp32, WEIGHT_OPS)
    model = onnx.load(str(source.path))
    name_nodes(model)
    named = out.with_name("int8-source.onnx")
    onnx.save(model, str(named))
    prepared = prepare(named, out.with_name("int8-prepared.onnx"))
    calibration = split.calibration if split is not None else []
    ops = fused_ops(onnx.load(str(prepared), load_external_data=False)) if calibration else ()
    ranges = Ranges(prepared, calibration, out.parent, ops)
    return _Graphs(fp32, out, source, named, prepared, calibration, ranges, [*why, *source.why])


class _Oracle:
    """What the planner asks of one export (planner.Oracle): each try quantized into `out`, judged on the held-back
    inputs and timed against fp32, the quantized nodes ranked, a passing recipe timed against fp32; progress shown
    per try."""

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
        calibrating = recipe.mode is Mode.STATIC and not self.graphs.ranges.has(recipe)
        with self.build.steps(f"calibrate and {STEP}" if calibrating else STEP, "onnx_int8"):
            quantize(self.graphs.prepared, self.graphs.out, recipe, self.graphs.ranges)
        self.written = recipe

    def ratio(self) -> float:
        """fp32 time / the written graph's time at the largest batch, measured side by side."""
        inputs = self.speed_inputs[max(self.speed_inputs)]
        return seconds_per_run(self.graphs.fp32, inputs) / seconds_per_run(self.graphs.out, inputs)

    def attempt(self, recipe: Int8Recipe) -> Judged:
        self.tries += 1
        try:
            self.write(recipe)
        except ExportError as exc:
            self.build.steps.progress(STEP, f"try {self.tries}: {recipe.describe()}: the quantizer failed")
            judged = _rows(self.verification.inputs)
            record = Int8Try(recipe.describe(), False, [exc.message], len(self.verification.inputs), raised=True,
                             judged=judged, kept_float=list(recipe.excluded))  # fmt: skip
            return Judged(recipe, None, record)
        runner = OnnxRuntimeRunner(self.graphs.out, self.io, name="onnx_int8", isolated=False)
        try:
            with self.build.steps("verify onnx_int8", "onnx_int8"):
                report = self.verification.judge(runner, self.tolerance)
        finally:
            runner.close()
        with self.build.steps("time onnx_int8", "onnx_int8"):
            record = _try(recipe, report, _rows(self.verification.inputs), self.ratio())
        verdict = "passes" if report.passed else f"fails ({', '.join(report.failures()[:1])})"
        self.build.steps.progress(STEP, f"try {self.tries}: {recipe.describe()}: {verdict}; {record.point()}")
        return Judged(recipe, report, record)

    def rank(self, judged: Judged) -> Ranking:
        recipe, graphs = judged.recipe, self.graphs
        if self.written != recipe:
            self.write(recipe)
        sets = self._ranking_sets()
        try:
            with self.build.steps("rank quantized nodes", "onnx_int8"):
                if recipe.mode is Mode.DYNAMIC:
                    scratch = graphs.prepared.with_name("int8-alone.onnx")
                    errors = output_errors(graphs.prepared, graphs.out, recipe, sets, scratch)
                    return Ranking(errors, "the noise each adds to the answer quantized alone")
                gains = revert_gains(graphs.prepared, graphs.out, sets, recipe.ops)
                costs = work_shares(onnx.load(str(graphs.prepared), load_external_data=False))
        except Exception as exc:  # a diagnosis: without it the search only stops early
            raise ExportError(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        return Ranking(gains, "the noise keeping each float removes from the answer, per speed it costs", costs)

    def time(self, recipe: Int8Recipe) -> dict[str, float]:
        if self.written != recipe:  # the graph written last is not the one kept
            self.write(recipe)
        with self.build.steps("time onnx_int8 against fp32", "onnx_int8"):
            return speedups(self.graphs.fp32, self.graphs.out, self.speed_inputs)

    def optimised(self, recipe: Int8Recipe) -> Optimised:
        """What ONNX Runtime runs of `recipe`'s graph: its integer ops and the Q/DQ pairs left."""
        if self.written != recipe:
            self.write(recipe)
        return optimised(self.graphs.out)

    def _ranking_sets(self) -> list[Tensors]:
        return (self.graphs.calibration or self.build.verification.random_sets)[:RANKING_SETS]


def _time_recipes(graphs: _Graphs, oracle: _Oracle) -> list[Timed]:
    """The base recipes of the mode with their speed against the fp32 artifact at the largest batch (0: the
    quantizer failed on it) and, static, the Q/DQ pairs ONNX Runtime leaves unfused. A static recipe quantizes the
    op set ONNX Runtime fuses in this graph (export.precision.int8.opset) or the weight ops alone, with uint8 or
    int8 activations."""
    if not graphs.calibration:
        ops = graphs.source.ops
        weights = (True,) if graphs.source.smoothed else (False, True)
        options = [Int8Recipe(mode=Mode.DYNAMIC, per_channel=pc, ops=ops) for pc in weights]
        what = "per-channel weights only (smoothing moved outliers into them)" if graphs.source.smoothed else (
            "per-tensor and per-channel weights")  # fmt: skip
    else:
        fused = graphs.ranges.ops
        op_sets = list(dict.fromkeys([fused, tuple(op for op in WEIGHT_OPS if op in fused)]))
        options = [Int8Recipe(activations=kind, ops=ops) for ops in op_sets for kind in Activations]
        what = f"U8S8 and S8S8, quantizing {' or '.join('/'.join(ops) for ops in op_sets)}"
    timed: list[Timed] = []
    for recipe in options:
        try:
            oracle.write(recipe)
        except ExportError:  # judged last, where it counts as a failed try
            timed.append(Timed(recipe, 0.0))
            continue
        pairs = optimised(graphs.out).pairs_left if recipe.mode is Mode.STATIC else None
        timed.append(Timed(recipe, oracle.ratio(), pairs))
    timed.sort(key=Timed.order)
    figures = "; ".join(_timed_figures(t) for t in timed)
    graphs.why.append(f"{what} timed against fp32 at batch {max(oracle.speed_inputs)}: {figures}; judged in that order")
    return timed


def _timed_figures(timed: Timed) -> str:
    if not timed.ratio:
        return f"{timed_part(timed.recipe)} failed to quantize"
    pairs = f", {timed.pairs_left} Q/DQ pairs left" if timed.pairs_left is not None else ""
    ops = f" ({'/'.join(timed.recipe.ops)})" if timed.recipe.mode is Mode.STATIC else ""
    return f"{timed_part(timed.recipe)}{ops} {timed.ratio:.2f}x{pairs}"


def _try(recipe: Int8Recipe, report: ParityReport, judged: int, speedup: float) -> Int8Try:
    """A try's record: its verdict, how many sets it failed, its outputs' lowest top-1 agreement (with its 95%
    interval over the `judged` inputs) and cosine (how close it came), its speed and the nodes it kept float."""
    rows = report.per_batch or []
    failing = sum(not row.passed for row in rows) if rows else int(not report.passed)

    def lowest(figure: str) -> float | None:
        values = [value for o in report.outputs if isinstance(value := getattr(o, figure, None), float)]
        return min(values, default=None)

    agreement = lowest("top1_agreement")
    interval = wilson(round(agreement * judged), judged) if agreement is not None and judged else None
    return Int8Try(
        recipe.describe(), report.passed, report.failures()[:2], failing, lowest("cosine"), agreement,
        judged=judged, interval=interval, speedup=round(speedup, 3), kept_float=list(recipe.excluded),
    )  # fmt: skip


def _rows(sets: Sequence[Tensors]) -> int:
    return sum(len(next(iter(s.values()))) for s in sets)
