"""The graph dynamic INT8 is quantized from, piece by piece on small graphs: smoothing is an exact fp32 rewrite that
leaves the residual path alone, the output-noise ranking finds the node that moves the answer, and a transformers
encoder offers its eager attention for the fused export and gets its own back afterwards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from modelship.export.precision.int8.quantize import quantize
from modelship.export.precision.int8.ranking import output_errors
from modelship.export.precision.int8.recipe import ActivationScale, Int8Recipe
from modelship.export.precision.int8.smooth import smooth

HIDDEN = 16


def _run(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _normalized_block(path: Path) -> None:
    """x -> LayerNorm -> (MatMul W) + LayerNorm's output (a residual) -> y, with one outlier channel."""
    rng = np.random.default_rng(0)
    gamma = np.ones(HIDDEN, np.float32)
    gamma[3] = 30.0  # the outlier channel a transformer's normalized states carry
    initializers = [
        numpy_helper.from_array(gamma, "gamma"),
        numpy_helper.from_array(np.zeros(HIDDEN, np.float32), "beta"),
        numpy_helper.from_array(rng.normal(size=(HIDDEN, HIDDEN)).astype(np.float32), "weight"),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["normed"], name="norm", axis=-1),
        helper.make_node("MatMul", ["normed", "weight"], ["projected"], name="project"),
        helper.make_node("Add", ["projected", "normed"], ["y"], name="residual"),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", HIDDEN])],
        initializers,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), str(path))


def test_smoothing_is_exact_in_fp32_and_leaves_the_residual_alone(tmp_path: Path) -> None:
    source, smoothed = tmp_path / "block.onnx", tmp_path / "smoothed.onnx"
    _normalized_block(source)
    x = np.random.default_rng(1).normal(size=(8, HIDDEN)).astype(np.float32)
    assert smooth(source, smoothed, [{"x": x}], ("MatMul",)) == 1
    np.testing.assert_allclose(_run(smoothed, x), _run(source, x), rtol=1e-5, atol=1e-5)
    nodes = {n.name: n for n in onnx.load(str(smoothed)).graph.node}
    assert nodes["project"].input[0] == "normed_smoothed" and nodes["residual"].input[1] == "normed"
    assert nodes["normed_smoothed"].op_type == "Mul"


def test_nothing_is_smoothed_without_a_normalization(tmp_path: Path) -> None:
    source, smoothed = tmp_path / "block.onnx", tmp_path / "smoothed.onnx"
    _normalized_block(source)
    assert smooth(source, smoothed, [], ("Gemm",)) == 0 and not smoothed.exists()


def test_each_quantized_node_is_ranked_by_what_it_alone_does_to_the_answer(tmp_path: Path) -> None:
    """Two MatMuls in a row: each quantized alone gives its own figure for the answer's noise, more for the one
    whose weights carry an outlier column, and the scratch graph is removed."""
    rng = np.random.default_rng(2)
    small = rng.normal(size=(HIDDEN, HIDDEN)).astype(np.float32) * 0.1
    loud = np.eye(HIDDEN, dtype=np.float32)
    loud[:, 0] = 40.0  # one outlier column: the identity's entries get a handful of levels
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "small"], ["hidden"], name="quiet_matmul"),
            helper.make_node("MatMul", ["hidden", "loud"], ["y"], name="loud_matmul"),
        ],
        "two",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", HIDDEN])],
        [numpy_helper.from_array(small, "small"), numpy_helper.from_array(loud, "loud")],
    )
    source, quantized = tmp_path / "two.onnx", tmp_path / "two.int8.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), str(source))
    recipe = Int8Recipe(mode="dynamic", ops=("MatMul",), scale=ActivationScale.TENSOR)  # one scale per batch
    quantize(source, quantized, recipe, [])
    sets = [{"x": rng.normal(size=(8, HIDDEN)).astype(np.float32)}]
    errors = output_errors(source, quantized, recipe, sets, tmp_path / "alone.onnx")
    assert set(errors) == {"quiet_matmul", "loud_matmul"} and all(e > 0 for e in errors.values()), errors
    assert errors["loud_matmul"] > errors["quiet_matmul"], errors
    assert not (tmp_path / "alone.onnx").exists()


def test_a_text_encoder_offers_eager_attention_and_gets_its_own_back() -> None:
    import transformers

    from modelship.checkpoint.families.hf_folder import EMBEDDING_TASK
    from modelship.checkpoint.families.hf_text import TextTensors
    from modelship.checkpoint.families.model_hooks import fusable_attention

    config = transformers.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64
    )
    model = TextTensors(transformers.BertModel(config, add_pooling_layer=False).eval(), EMBEDDING_TASK, None)
    before = model.model.config._attn_implementation
    attention = fusable_attention(model)
    assert attention is not None and (attention.num_heads, attention.hidden_size) == (4, 32)
    with attention.eager():
        assert model.model.config._attn_implementation == "eager"
    assert model.model.config._attn_implementation == before
