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
from modelship.export.precision.int8.per_token import per_token
from modelship.export.precision.int8.ranges import Ranges, ort_method
from modelship.export.precision.int8.recipe import Activations, ActivationScale, Int8Recipe, Mode


@dataclass
class Quantized:
    """A quantized graph written to `path`, and its recipe."""

    path: Path
    recipe: Int8Recipe


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
    fp32: Path, out: Path, recipe: Int8Recipe, ranges: Ranges | None = None, only: Sequence[str] = ()
) -> Quantized:
    """Quantize the fp32 graph at `fp32` into `out` by `recipe` (static: activation ranges from `ranges`, calibrated
    on first use; `only`: those nodes alone); an ExportError naming the recipe when ONNX Runtime's quantizer or
    calibrator fails on it."""
    try:
        with quiet():
            return _quantize(fp32, out, recipe, ranges, list(only))
    except ExportError:
        raise
    except Exception as exc:  # whatever ONNX Runtime's quantizer raises on a graph: one failed recipe, one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ExportError(
            f"ONNX Runtime's quantizer failed on this graph with {recipe.describe()}: {reason}",
            hint="export without --int8, or report the model: its graph needs a recipe modelship does not try",
        ) from None


def _quantize(fp32: Path, out: Path, recipe: Int8Recipe, ranges: Ranges | None, only: list[str]) -> Quantized:
    from onnxruntime.quantization import (
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
        if not ranges:
            raise ExportError(f"{recipe.describe()}: static INT8 needs calibration inputs", hint="pass --calibrate")
        symmetric = recipe.activations is Activations.INT8
        quantize_static(
            fp32,
            out,
            None,
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=list(recipe.ops),
            per_channel=recipe.per_channel,
            reduce_range=recipe.reduce_range,
            activation_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=excluded,
            nodes_to_quantize=only,
            calibrate_method=ort_method(recipe.method),
            calibration_cache_path=ranges.for_recipe(recipe),
            extra_options={"ActivationSymmetric": symmetric, "WeightSymmetric": True},
        )
    return Quantized(out, recipe)
