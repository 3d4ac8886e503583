"""ONNX Runtime's quantizer as the INT8 search drives it (export.precision.int8.quantize), on a small graph:
calibration never depends on the number of inputs being a multiple of the batch (a histogram calibrator stacks the
sets one call gives it: 52 photos in batches of 8 left a last batch of 4 and crashed it), and a recipe it fails on
is an ExportError naming the recipe."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from modelship.contract.errors import ExportError
from modelship.export.precision.int8.quantize import quantize
from modelship.export.precision.int8.ranges import Ranges
from modelship.export.precision.int8.recipe import WEIGHT_OPS, Int8Recipe


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3)).eval()
    path = tmp_path_factory.mktemp("int8") / "model.onnx"
    torch.onnx.export(model, (torch.rand(2, 3, 16, 16),), str(path), input_names=["image"], output_names=["out"],
                      dynamic_axes={"image": {0: "batch"}}, dynamo=False)  # fmt: skip
    return path


@pytest.mark.parametrize("method", ["minmax", "percentile", "entropy"])
def test_a_last_batch_shorter_than_the_others_calibrates(graph: Path, tmp_path: Path, method: str) -> None:
    rng = np.random.default_rng(0)
    sets = [{"image": rng.random((rows, 3, 16, 16), dtype=np.float32)} for rows in (8, 8, 4)]
    ranges = Ranges(graph, sets, tmp_path, WEIGHT_OPS)
    quantized = quantize(graph, tmp_path / "int8.onnx", Int8Recipe(method=method), ranges)
    assert quantized.path.is_file() and quantized.recipe.method == method


def test_a_recipe_the_quantizer_fails_on_is_an_error_naming_it(graph: Path, tmp_path: Path) -> None:
    recipe = replace(Int8Recipe(), ops=("Conv",), method="percentile")
    with pytest.raises(
        ExportError, match="quantizer failed on this graph with static QDQ U8S8, per-channel, percentile"
    ):
        wrong = [{"wrong_input": np.zeros((1, 3, 16, 16), np.float32)}]
        quantize(graph, tmp_path / "int8.onnx", recipe, Ranges(graph, wrong, tmp_path, WEIGHT_OPS))
