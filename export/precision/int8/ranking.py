"""Which quantized nodes hurt the answer: for a static recipe, what keeping each float removes from the answer as
a server computes it (`revert_gains`), with what it costs (`work_shares`); for a dynamic one, the noise each adds
quantized alone (`output_errors`, through the one probe, parity.probe); and the activation maxima smoothing reads."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import onnx

from modelship.contract.tensors import Tensors
from modelship.export.precision.int8.quantize import quantize
from modelship.export.precision.int8.recipe import WEIGHT_OPS, Int8Recipe
from modelship.parity.probe import Probe

RANKING_SETS = 4  # input sets the node ranking runs on (its activations are held one set at a time)


def output_errors(
    fp32: Path, quantized: Path, recipe: Int8Recipe, sets: Sequence[Tensors], scratch: Path
) -> dict[str, float]:
    """Each quantized node's effect on the answer: the graph's outputs' noise-to-signal against the fp32 graph's on
    `sets` with that node alone quantized by `recipe` (written to `scratch`, one quantization per node: cheap for a
    dynamic recipe, which calibrates nothing). Own errors (a node's noise against its input's) rank an attention,
    whose output joins a far larger residual stream, above the feed-forward MatMuls that move the answer more."""
    model = onnx.load(str(fp32), load_external_data=False)
    done = quantized_nodes(model, onnx.load(str(quantized), load_external_data=False), recipe.ops)
    outputs = [o.name for o in model.graph.output]
    reference = _Remembered(Probe(fp32, outputs))
    errors = {}
    for name in sorted(done):
        quantize(fp32, scratch, recipe, only=[name])
        errors[name] = _answer_noise(reference, Probe(scratch, outputs), sets[:RANKING_SETS])
    scratch.unlink(missing_ok=True)
    return errors


def revert_gains(fp32: Path, quantized: Path, sets: Sequence[Tensors], ops: Sequence[str]) -> dict[str, float]:
    """What keeping each quantized node float does to the answer: the outputs' noise-to-signal against the fp32
    graph's on `sets`, quantized as `quantized` is, minus the same with that node alone reading its fp32 inputs (its
    float weights, and the activations before their Q/DQ pair). Positive: keeping it float brings the answer closer.

    The quantized graph is edited, not quantized again (as NNCF's accuracy control reverts a quantizer): one
    session per node and no calibration, so every node can be measured. A node the quantizer folded away (a Clip
    or Relu inside its producer's range) has nothing to revert alone and is not ranked."""
    reference_model = onnx.load(str(fp32))
    model = onnx.load(str(quantized))
    done = quantized_nodes(reference_model, model, ops)
    float_inputs = {node.name: list(node.input) for node in reference_model.graph.node}
    weights = {init.name: init for init in reference_model.graph.initializer}
    outputs = [o.name for o in reference_model.graph.output]
    reference = _Remembered(_Served(fp32, outputs))

    def noise() -> float:
        return _answer_noise(reference, _Served(quantized, outputs, model.SerializeToString()), sets)

    base = noise()
    gains: dict[str, float] = {}
    known = {i.name for i in model.graph.initializer} | {o for n in model.graph.node for o in n.output}
    for node in model.graph.node:  # each edit is undone before the next: `known` holds for every node
        if node.name not in done:
            continue
        quantized_inputs = list(node.input)
        added = [weights[name] for name in float_inputs[node.name] if name in weights and name not in known]
        node.ClearField("input")
        node.input.extend(float_inputs[node.name])
        model.graph.initializer.extend(added)
        with contextlib.suppress(Exception):  # a float input the quantizer renamed away: nothing to revert alone
            gains[node.name] = base - noise()
        node.ClearField("input")
        node.input.extend(quantized_inputs)
        for _ in added:
            model.graph.initializer.pop()
    return gains


def work_shares(model: onnx.ModelProto) -> dict[str, float]:
    """Each weight node's share of the graph's multiply-adds, per row: its weight's size times the positions it is
    applied at (the output's dimensions past the channels, from the shapes inferred ahead; 1 where unknown)."""
    weights = {init.name: int(np.prod(init.dims)) for init in model.graph.initializer}
    shapes = {
        info.name: [d.dim_value if d.HasField("dim_value") else 0 for d in info.type.tensor_type.shape.dim]
        for info in (*model.graph.value_info, *model.graph.output)
    }
    work: dict[str, float] = {}
    for node in model.graph.node:
        size = max((weights[i] for i in node.input if i in weights), default=0)
        if size and node.output and node.op_type in (*WEIGHT_OPS, "ConvTranspose"):
            dims = shapes.get(node.output[0], [])
            positions = [d for d in dims[2:] if d > 0] if node.op_type.startswith("Conv") else dims[1:-1]
            work[node.name] = float(size * int(np.prod([d for d in positions if d > 0])))
    total = sum(work.values())
    return {name: value / total for name, value in work.items()} if total else {}


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


class _Outputs(Protocol):
    """Tensors of a graph by name, for one input set (a Probe, or the graph as served)."""

    names: list[str]

    def run(self, inputs: Tensors) -> Tensors: ...


class _Served:
    """The outputs of `names` of the graph at `path` (or its serialized `model`) as a server computes them: ONNX
    Runtime's optimised CPU session, its integer kernels and their saturation included."""

    def __init__(self, path: Path, names: Sequence[str], model: bytes | None = None) -> None:
        from modelship.parity import make_session

        self.names = list(names)
        self._session = make_session(path, model=model)

    def run(self, inputs: Tensors) -> Tensors:
        return dict(zip(self.names, self._session.run(self.names, inputs), strict=True))


class _Remembered:
    """A reference whose answer to each input set is computed once (the sets are the same objects every time)."""

    def __init__(self, outputs: _Outputs) -> None:
        self.names, self._outputs = outputs.names, outputs
        self._answers: dict[int, Tensors] = {}

    def run(self, inputs: Tensors) -> Tensors:
        if id(inputs) not in self._answers:
            self._answers[id(inputs)] = self._outputs.run(inputs)
        return self._answers[id(inputs)]


def _answer_noise(reference: _Outputs, candidate: _Outputs, sets: Sequence[Tensors]) -> float:
    """The candidate's noise-to-signal against the reference over every tensor both expose and every set."""
    sums = _noise_and_power(reference, candidate, sets).values()
    return sum(noise for noise, _ in sums) / max(sum(power for _, power in sums), 1e-30)


def _noise_and_power(
    reference: _Outputs, candidate: _Outputs, sets: Sequence[Tensors]
) -> dict[str, tuple[float, float]]:
    """For each tensor both probes expose: the candidate's squared error against the reference and the reference's
    own power (float64 sums over `sets`, one set at a time: a model's every activation at once would not fit in
    memory; NaN noise where the shapes differ)."""
    shared = [name for name in reference.names if name in set(candidate.names)]
    sums = dict.fromkeys(shared, (0.0, 0.0))
    for inputs in sets:
        expected, got = reference.run(inputs), candidate.run(inputs)
        for name in shared:
            ref, cand = expected[name], got[name]
            noise, power = sums[name]
            if ref.shape != cand.shape:
                sums[name] = (float("nan"), power)
                continue
            sums[name] = (
                noise + float(np.sum(np.square(ref - cand, dtype=np.float64))),
                power + float(np.sum(np.square(ref, dtype=np.float64))),
            )
    return sums


def activation_maxima(path: Path, names: Sequence[str], sets: Sequence[Tensors]) -> Tensors:
    """The largest magnitude of each last-axis channel of the tensors of `names` in the graph at `path`, over
    `sets` (one set at a time)."""
    probe = Probe(path, names)
    maxima: Tensors = {}
    for inputs in sets:
        for name, value in probe.run(inputs).items():
            channels = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], channels) if name in maxima else channels
    return maxima
