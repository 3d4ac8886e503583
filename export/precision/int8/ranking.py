"""Which quantized nodes hurt: each node's own error against the fp32 graph, or the noise each adds to the answer
quantized alone, read through the one probe (parity.probe); and the activation maxima smoothing reads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

from modelship.contract.tensors import Tensors
from modelship.export.precision.int8.quantize import quantize
from modelship.export.precision.int8.recipe import Int8Recipe
from modelship.parity.probe import Probe

RANKING_SETS = 4  # input sets the node ranking runs on (its activations are held one set at a time)


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
    nsr = {name: noise / max(power, 1e-30) for name, (noise, power) in _noise_and_power(
        Probe(fp32, tensors), Probe(quantized, tensors), sets[:RANKING_SETS]).items()}  # fmt: skip
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
    outputs = [o.name for o in model.graph.output]
    reference = Probe(fp32, outputs)
    errors = {}
    for name in sorted(done):
        quantize(fp32, scratch, recipe, [], only=[name])
        sums = _noise_and_power(reference, Probe(scratch, outputs), sets[:RANKING_SETS]).values()
        errors[name] = sum(noise for noise, _ in sums) / max(sum(power for _, power in sums), 1e-30)
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


def _noise_and_power(reference: Probe, candidate: Probe, sets: Sequence[Tensors]) -> dict[str, tuple[float, float]]:
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


def activation_maxima(path: Path, names: Sequence[str], sets: Sequence[Tensors]) -> dict[str, np.ndarray]:
    """The largest magnitude of each last-axis channel of the tensors of `names` in the graph at `path`, over
    `sets` (one set at a time)."""
    probe = Probe(path, names)
    maxima: dict[str, np.ndarray] = {}
    for inputs in sets:
        for name, value in probe.run(inputs).items():
            channels = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], channels) if name in maxima else channels
    return maxima
