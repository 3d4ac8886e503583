"""Static INT8's activation ranges (export.precision.int8.ranges) and op set (export.precision.int8.opset) on a small
real graph, through ONNX Runtime's own calibrators and quantizer: calibrated once per kind and reused, a histogram
calibrator's memory bounded by one input set whatever their number, the op set ONNX Runtime fuses found in the
graph, and what its optimiser leaves of the Q/DQ pairs counted from the graph it runs."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelship.contract.tensors import Tensors
from modelship.export.precision.int8.opset import fused_ops, optimised
from modelship.export.precision.int8.quantize import quantize
from modelship.export.precision.int8.ranges import Ranges, chunks
from modelship.export.precision.int8.recipe import WEIGHT_OPS, Activations, Calibration, Int8Recipe

CHANNELS, SIDE = 16, 64


def _conv_graph(path: Path) -> Path:
    """image -> Conv -> Clip(0, 6) -> Conv -> Add(residual) -> GlobalAveragePool -> Flatten -> Gemm: the shape of
    a mobile CNN's block."""
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"], name="relu6"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["sum"], name="residual"),
        helper.make_node("GlobalAveragePool", ["sum"], ["pooled"], name="pool"),
        helper.make_node("Flatten", ["pooled"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], name="fc", transB=1),
    ]
    initializers = [
        weight("w1", CHANNELS, 3, 3, 3), weight("b1", CHANNELS), weight("w2", CHANNELS, CHANNELS, 3, 3),
        weight("b2", CHANNELS), weight("fc", 10, CHANNELS), weight("fcb", 10),
        numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, SIDE, SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _sets(count: int, rows: int = 8) -> list[Tensors]:
    rng = np.random.default_rng(1)
    return [{"image": rng.uniform(0, 1, (rows, 3, SIDE, SIDE)).astype(np.float32)} for _ in range(count)]


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _conv_graph(tmp_path_factory.mktemp("ranges") / "block.onnx")


def test_the_op_set_onnx_runtime_fuses_is_read_off_the_graph_weight_ops_first(graph: Path) -> None:
    assert fused_ops(onnx.load(str(graph))) == ("Conv", "Gemm", "Add", "Clip", "Flatten", "GlobalAveragePool")


def test_histogram_chunks_keep_the_sets_in_order_within_their_values_and_of_one_shape() -> None:
    sets = [{"image": np.zeros((rows, 10), np.float32)} for rows in (2, 2, 1, 3, 3, 3, 9, 1)]
    assert [[len(s["image"]) for s in group] for group in chunks(sets, 60)] == [[2, 2], [1], [3, 3], [3], [9], [1]]


def test_ranges_are_calibrated_once_per_kind_and_reused_by_every_try(graph: Path, tmp_path: Path) -> None:
    fused = fused_ops(onnx.load(str(graph)))
    ranges = Ranges(graph, _sets(3), tmp_path, fused)
    recipe = Int8Recipe(ops=WEIGHT_OPS)
    for excluded in ((), ("conv2",), ("conv1", "conv2")):
        quantize(graph, tmp_path / "q.onnx", recipe.excluding(excluded), ranges)
    quantize(graph, tmp_path / "q.onnx", Int8Recipe(ops=WEIGHT_OPS, per_channel=False, reduce_range=False), ranges)
    quantize(graph, tmp_path / "q.onnx", Int8Recipe(ops=fused), ranges)
    assert len(list(tmp_path.glob("int8-ranges-*.json"))) == 1  # op sets, excluded nodes and weights share them
    quantize(graph, tmp_path / "q.onnx", Int8Recipe(ops=fused, activations=Activations.INT8), ranges)
    quantize(graph, tmp_path / "q.onnx", Int8Recipe(ops=WEIGHT_OPS, method=Calibration.PERCENTILE), ranges)
    assert len(list(tmp_path.glob("int8-ranges-*.json"))) == 3  # symmetric ranges, percentile ranges
    ranges.clean()
    assert not list(tmp_path.glob("int8-ranges-*.json"))


def _calibration_peak(graph: Path, folder: Path, count: int, method: Calibration) -> int:
    ranges = Ranges(graph, _sets(count), folder, WEIGHT_OPS, chunk=2 * 8 * 3 * SIDE * SIDE)  # two sets a call
    tracemalloc.start()
    try:
        ranges.for_recipe(Int8Recipe(ops=WEIGHT_OPS, method=method))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        ranges.clean()


@pytest.mark.parametrize("method", [Calibration.PERCENTILE, Calibration.ENTROPY, Calibration.MINMAX])
def test_calibration_holds_one_chunk_of_inputs_at_a_time_whatever_their_number(
    graph: Path, tmp_path: Path, method: Calibration
) -> None:
    """Given every set at once, ONNX Runtime's histogram calibrators keep every activation of every input (7.8 GB
    for 120 photos of 224x224); fed a chunk of sets per call (two here) they merge each into their histograms.
    Measured: the peak of what numpy allocates, 4 sets against 32: 28 more sets add less than one activation tensor
    of one set (8 x 16 x 64 x 64 floats, 2 MB; MinMax keeps only each set's reduced ranges)."""
    few, many = (_calibration_peak(graph, tmp_path, count, method) for count in (4, 32))
    assert many < few + 8 * CHANNELS * SIDE * SIDE * 4, (few, many)


def test_the_pairs_onnx_runtime_leaves_are_counted_from_the_graph_it_runs(graph: Path, tmp_path: Path) -> None:
    fused = fused_ops(onnx.load(str(graph)))
    ranges = Ranges(graph, _sets(2), tmp_path, fused)
    weights_only = optimised(quantize(graph, tmp_path / "w.onnx", Int8Recipe(ops=WEIGHT_OPS), ranges).path)
    everything = optimised(quantize(graph, tmp_path / "f.onnx", Int8Recipe(ops=fused), ranges).path)
    assert everything.pairs_left < weights_only.pairs_left, (everything, weights_only)
    assert everything.integer_ops >= weights_only.integer_ops >= 2  # two convolutions at least run in int8
