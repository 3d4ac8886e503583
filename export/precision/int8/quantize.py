"""INT8 ONNX, the mechanics: a recipe (export.precision.int8.recipe) applied by ONNX Runtime's own quantizer (QDQ
format: standard ONNX ops every ONNX Runtime loads, and what TensorRT reads on a GPU; dynamic recipes then scaled per
token, export.precision.int8.per_token). Which recipes are tried and which ships is the planner's."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

from modelship.contract.errors import ExportError
from modelship.contract.tensors import Tensors
from modelship.export.precision.int8.per_token import per_token
from modelship.export.precision.int8.recipe import Activations, ActivationScale, Calibration, Int8Recipe, Mode


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
    if recipe.mode is Mode.DYNAMIC:
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
            Calibration.MINMAX: CalibrationMethod.MinMax,
            Calibration.ENTROPY: CalibrationMethod.Entropy,
            Calibration.PERCENTILE: CalibrationMethod.Percentile,
        }
        symmetric = recipe.activations is Activations.INT8
        activations = QuantType.QInt8 if symmetric else QuantType.QUInt8
        # a histogram calibrator stacks what each set gives: sets of one row each stack whatever the batch left over
        histogram = recipe.method is not Calibration.MINMAX
        sets = [row for inputs in calibration for row in _rows(inputs)] if histogram else list(calibration)
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
                "CalibMovingAverage": not histogram,  # per-batch ranges averaged: one outlier sets none
                "CalibTensorRangeSymmetric": symmetric,
                "CalibPercentile": 99.999,
                "ActivationSymmetric": symmetric,
                "WeightSymmetric": True,
            },
        )
    return Quantized(out, recipe)
