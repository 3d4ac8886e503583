"""INT8 ONNX, the mechanics: a recipe (what is quantized and how), the quantized graph it gives (ONNX Runtime's
own quantizer, QDQ format: standard ONNX ops every ONNX Runtime loads, and what TensorRT reads on a GPU), each
quantized node's own error against the fp32 graph, and ONNX Runtime's speed on this CPU.

Which recipe, which nodes stay float and whether the result ships is decided by measurement in
export.int8_strategy."""

from __future__ import annotations

import contextlib
import io
import logging
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from modelship.contract.errors import ExportError
from modelship.export.int8_per_token import per_token

Tensors = dict[str, np.ndarray]
WEIGHT_OPS = ("Conv", "MatMul", "Gemm")  # what carries the time, and what INT8 kernels speed up
SPEED_SECONDS = 0.6  # timed per model and batch, after a warm-up run
SPEED_MIN_RUNS = 3
RANKING_SETS = 4  # input sets the node ranking runs on (its activations are held one set at a time)
SATURATION = (
    "an x86 CPU without VNNI (AVX2) sums pairs of uint8 x int8 products in 16 bits and saturates on full-range "
    "weights (ONNX Runtime's documented caveat); 7-bit weights never do"
)


class ActivationScale(StrEnum):
    """How dynamic INT8 scales an activation: one scale for the whole batch (ONNX Runtime's DynamicQuantizeLinear: a
    row's answer moves with its batchmates) or one per row (export.int8_per_token: it never does)."""

    TENSOR = "per-tensor"
    TOKEN = "per-token"


@dataclass(frozen=True)
class Int8Recipe:
    """How to quantize: `mode` static (activations calibrated) or dynamic (weights only, activations quantized per
    batch at run time); `activations` uint8 or int8 (U8S8 is the fast path of x86 VNNI kernels, S8S8 ONNX Runtime's
    documented default); `per_channel` weight scales; `method` the calibration (minmax, entropy, percentile);
    `ops` the op types quantized; `excluded` nodes kept float; `reduce_range` weights in 7 bits (see
    SATURATION); `scale` a dynamic recipe's activation scales (ActivationScale)."""

    mode: str = "static"
    activations: str = "uint8"
    per_channel: bool = True
    method: str = "minmax"
    ops: tuple[str, ...] = WEIGHT_OPS
    excluded: tuple[str, ...] = ()
    reduce_range: bool = True
    scale: ActivationScale = ActivationScale.TOKEN

    def describe(self) -> str:
        if self.mode == "dynamic":
            weights = "per-channel" if self.per_channel else "per-tensor"
            text = f"dynamic, {self.scale.value} uint8 activations, {weights} int8 weights"
        else:
            acts = "U8S8" if self.activations == "uint8" else "S8S8"
            text = f"static QDQ {acts}, {'per-channel' if self.per_channel else 'per-tensor'}, {self.method}"
        text += f", {'7-bit weights, ' if self.reduce_range else ''}{'/'.join(self.ops)}"
        count = len(self.excluded)
        return text + (f", {count} node{'s' if count > 1 else ''} float" if count else "")

    def excluding(self, nodes: Sequence[str]) -> Int8Recipe:
        return replace(self, excluded=tuple(dict.fromkeys((*self.excluded, *nodes))))


@dataclass
class Quantized:
    """A quantized graph written to `path`, and its recipe."""

    path: Path
    recipe: Int8Recipe


class _Reader:
    """ONNX Runtime's CalibrationDataReader protocol over our input sets."""

    def __init__(self, sets: Sequence[Tensors]) -> None:
        self._sets = iter(list(sets))

    def get_next(self) -> Tensors | None:
        return next(self._sets, None)


def _rows(inputs: Tensors) -> list[Tensors]:
    """One input set split into sets of one row each."""
    count = len(next(iter(inputs.values())))
    return [{name: value[i : i + 1] for name, value in inputs.items()} for i in range(count)]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """ONNX Runtime's quantizer prints its progress to stdout and warns through the root logger: neither may reach
    a `--json` stdout or the user's terminal."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logging.disable(previous)


def prepare(fp32: Path, out: Path) -> Path:
    """ONNX Runtime's pre-processing for quantization (shape inference, graph optimisation) written to `out`; the
    graph itself when it cannot be (a graph symbolic shape inference does not follow): quantized as it is."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        with quiet():
            quant_pre_process(str(fp32), str(out), skip_symbolic_shape=True)
    except Exception:  # a diagnosis step: without it quantization still works, only less well
        return fp32
    return out


def quantize(
    fp32: Path, out: Path, recipe: Int8Recipe, calibration: Sequence[Tensors], only: Sequence[str] = ()
) -> Quantized:
    """Quantize the fp32 graph at `fp32` into `out` by `recipe` (static: ranges from `calibration`; `only`: those
    nodes alone); an ExportError naming the recipe when ONNX Runtime's quantizer fails on it."""
    try:
        with quiet():
            return _quantize(fp32, out, recipe, calibration, list(only))
    except ExportError:
        raise
    except Exception as exc:  # whatever ONNX Runtime's quantizer raises on a graph: one failed recipe, one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ExportError(
            f"ONNX Runtime's quantizer failed on this graph with {recipe.describe()}: {reason}",
            hint="export without --int8, or report the model: its graph needs a recipe modelship does not try",
        ) from None


def _quantize(fp32: Path, out: Path, recipe: Int8Recipe, calibration: Sequence[Tensors], only: list[str]) -> Quantized:
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    excluded = list(recipe.excluded)
    if recipe.mode == "dynamic":
        quantize_dynamic(
            fp32,
            out,
            op_types_to_quantize=[op for op in recipe.ops if op != "Conv"],
            per_channel=recipe.per_channel,
            reduce_range=recipe.reduce_range,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=excluded,
            nodes_to_quantize=only,
            # fused ops (Attention) are contrib ops its type inference does not know: their outputs are float
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        if recipe.scale is ActivationScale.TOKEN:
            onnx.save(per_token(onnx.load(str(out))), str(out))
    else:
        methods = {
            "minmax": CalibrationMethod.MinMax,
            "entropy": CalibrationMethod.Entropy,
            "percentile": CalibrationMethod.Percentile,
        }
        activations = QuantType.QUInt8 if recipe.activations == "uint8" else QuantType.QInt8
        # a histogram calibrator stacks what each set gives: sets of one row each stack whatever the batch left over
        sets = calibration if recipe.method == "minmax" else [row for inputs in calibration for row in _rows(inputs)]
        quantize_static(
            fp32,
            out,
            _Reader(sets),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=list(recipe.ops),
            per_channel=recipe.per_channel,
            reduce_range=recipe.reduce_range,
            activation_type=activations,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=excluded,
            nodes_to_quantize=only,
            calibrate_method=methods[recipe.method],
            extra_options={
                "CalibMovingAverage": recipe.method == "minmax",  # per-batch ranges averaged: one outlier sets none
                "CalibTensorRangeSymmetric": recipe.activations == "int8",
                "CalibPercentile": 99.999,
                "ActivationSymmetric": recipe.activations == "int8",
                "WeightSymmetric": True,
            },
        )
    return Quantized(out, recipe)


def name_nodes(model: onnx.ModelProto) -> None:
    """Give every unnamed node a unique name (the quantizer's exclusions and the error ranking go by name)."""
    taken = {n.name for n in model.graph.node if n.name}
    for index, node in enumerate(model.graph.node):
        if not node.name:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)


def node_errors(fp32: Path, quantized: Path, sets: Sequence[Tensors], ops: Sequence[str]) -> dict[str, float]:
    """Each quantized node's own error: the noise it adds, as a share of its output's power (noise-to-signal of
    its output minus that of its input, both against the fp32 graph's same tensor on `sets`). A node that adds much
    noise is one quantization hurts; one downstream of another's damage adds little of its own."""
    model = onnx.load(str(fp32))
    initializers = {i.name for i in model.graph.initializer}
    done = quantized_nodes(model, onnx.load(str(quantized), load_external_data=False), ops)
    wanted: dict[str, tuple[str, str]] = {}
    for node in model.graph.node:
        if node.name in done:
            inputs = [i for i in node.input if i and i not in initializers]
            if inputs and node.output:
                wanted[node.name] = (inputs[0], node.output[0])
    graph_inputs = {i.name for i in model.graph.input}
    tensors = sorted({t for pair in wanted.values() for t in pair} - graph_inputs)
    nsr = _noise_to_signal(fp32, quantized, tensors, sets[:RANKING_SETS])
    errors = {}
    for name, (source, target) in wanted.items():
        before = 0.0 if source in graph_inputs else nsr.get(source, float("nan"))
        after = nsr.get(target, float("nan"))
        if np.isfinite(after):
            errors[name] = max(after - (before if np.isfinite(before) else 0.0), 0.0)
    return errors


def output_errors(
    fp32: Path, quantized: Path, recipe: Int8Recipe, sets: Sequence[Tensors], scratch: Path
) -> dict[str, float]:
    """Each quantized node's effect on the answer: the graph's outputs' noise-to-signal against the fp32 graph's on
    `sets` with that node alone quantized by `recipe` (written to `scratch`, one quantization per node: cheap for a
    dynamic recipe, which calibrates nothing). Own errors (node_errors) rank an attention, whose output joins a far
    larger residual stream, above the feed-forward MatMuls that move the answer more."""
    model = onnx.load(str(fp32), load_external_data=False)
    done = quantized_nodes(model, onnx.load(str(quantized), load_external_data=False), recipe.ops)
    sets = sets[:RANKING_SETS]
    outputs = [o.name for o in model.graph.output]
    fp32_session = _session(fp32)
    reference = [_run(fp32_session, outputs, inputs) for inputs in sets]
    errors = {}
    for name in sorted(done):
        quantize(fp32, scratch, recipe, [], only=[name])
        session = _session(scratch)
        noise = power = 0.0
        for inputs, expected in zip(sets, reference, strict=True):
            for ref, got in zip(expected, _run(session, outputs, inputs), strict=True):
                added, signal = _noise_and_power(ref, got)
                noise, power = noise + added, power + signal
        errors[name] = noise / max(power, 1e-30)
    scratch.unlink(missing_ok=True)
    return errors


def quantized_nodes(fp32: onnx.ModelProto, quantized: onnx.ModelProto, ops: Sequence[str]) -> set[str]:
    """The nodes of `fp32` (of `ops`) that `quantized` quantized: replaced by an integer op (dynamic), or reading a
    DequantizeLinear's output (QDQ). An attention's activation x activation MatMul is in neither."""
    present = {n.name: n for n in quantized.graph.node}
    dequantized = {o for n in quantized.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    return {
        node.name
        for node in fp32.graph.node
        if node.op_type in ops and (node.name not in present or any(i in dequantized for i in present[node.name].input))
    }


def _noise_to_signal(fp32: Path, quantized: Path, names: Sequence[str], sets: Sequence[Tensors]) -> dict[str, float]:
    """Noise power over signal power of each tensor in `names` (those both graphs have), the quantized graph's
    against the fp32 graph's, summed over `sets` one set at a time (a model's every activation at once would not
    fit in memory)."""
    sessions = [_exposing(path, names) for path in (fp32, quantized)]
    shared = sorted(set(sessions[0][1]) & set(sessions[1][1]))
    noise = dict.fromkeys(shared, 0.0)
    power = dict.fromkeys(shared, 0.0)
    for inputs in sets:
        reference, candidate = (
            dict(zip(shared, _run(session, shared, inputs), strict=True)) for session, _ in sessions
        )
        for name in shared:
            ref, cand = reference[name], candidate[name]
            if ref.shape != cand.shape:
                noise[name] = float("nan")
                continue
            added, signal = _noise_and_power(ref, cand)
            noise[name] += added
            power[name] += signal
    return {name: noise[name] / max(power[name], 1e-30) for name in shared}


def _noise_and_power(reference: np.ndarray, candidate: np.ndarray) -> tuple[float, float]:
    """The candidate's squared error against the reference, and the reference's own power (float64 sums)."""
    return (
        float(np.sum(np.square(reference - candidate, dtype=np.float64))),
        float(np.sum(np.square(reference, dtype=np.float64))),
    )


def activation_maxima(path: Path, names: Sequence[str], sets: Sequence[Tensors]) -> dict[str, np.ndarray]:
    """The largest magnitude of each last-axis channel of the tensors of `names` in the graph at `path`, over
    `sets` (one set at a time)."""
    session, exposed = _exposing(path, names)
    maxima: dict[str, np.ndarray] = {}
    for inputs in sets:
        for name, value in zip(exposed, _run(session, exposed, inputs), strict=True):
            channels = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], channels) if name in maxima else channels
    return maxima


def _exposing(path: Path, names: Sequence[str]) -> tuple[object, list[str]]:
    """An ONNX Runtime session of the graph at `path` answering the tensors of `names` it has, and those names."""
    import onnxruntime as ort

    model = onnx.load(str(path))
    present = {o for n in model.graph.node for o in n.output}
    exposed = [n for n in names if n in present]
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in exposed)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]), exposed


def _session(path: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _run(session: object, names: Sequence[str], inputs: Tensors) -> list[np.ndarray]:
    taken = {i.name for i in session.get_inputs()}  # type: ignore[attr-defined]
    return session.run(list(names), {k: v for k, v in inputs.items() if k in taken})  # type: ignore[attr-defined]


def seconds_per_run(path: Path, inputs: Tensors) -> float:
    """ONNX Runtime's median seconds for one run of the graph at `path` on `inputs`, on this CPU (default threads,
    as the serving backend runs it)."""
    session = _session(path)
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
