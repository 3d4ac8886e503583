"""fp16 variants: ONNX graphs converted to float16, and half-precision copies of eager modules for TorchScript.

ONNX conversion uses `onnxruntime.transformers.float16` followed by a topological sort: onnxconverter-common's
converter writes graphs ONNX Runtime refuses to load for Swin and legacy-exported ViTs, and the raw output of
ONNX Runtime's converter is not topologically sorted (docs/export.md). Precision-sensitive ops are converted too at
first; if parity fails, the pipeline retries with the widening block lists of FP16_ATTEMPTS, keeping those ops in
fp32, and records which were kept and why.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import onnx
from torch import nn

from export.errors import ExportError

# (why, op types kept in fp32), tried in order, each list including the previous ones.
_NORMALISATION = ("LayerNormalization", "Softmax", "ReduceMean", "GroupNormalization", "InstanceNormalization")
_RANGE = ("Pow", "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "ReduceSum", "ReduceL2", "Div")
FP16_ATTEMPTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("all ops in fp16", ()),
    ("normalisation and softmax accumulate in fp32", _NORMALISATION),
    ("exponentials, powers and divisions overflow or underflow fp16", (*_NORMALISATION, *_RANGE)),
)


def convert_onnx_fp16(
    proto: onnx.ModelProto, *, keep_io_types: bool = True, op_block_list: Sequence[str] = ()
) -> onnx.ModelProto:
    """A float16 copy of `proto` (float32 I/O kept when `keep_io_types`); `op_block_list` ops stay float32, on top
    of ONNX Runtime's default block list (ops without fp16 kernels)."""
    from onnxruntime.transformers import float16
    from onnxruntime.transformers.onnx_model import OnnxModel

    blocked = sorted({*float16.DEFAULT_OP_BLOCK_LIST, *op_block_list})
    try:
        converted = float16.convert_float_to_float16(
            copy.deepcopy(proto), keep_io_types=keep_io_types, op_block_list=blocked
        )
        model = OnnxModel(converted)
        model.topological_sort()
    except Exception as exc:  # the converter asserts and raises ValueError/KeyError on graphs it cannot handle
        raise ExportError(
            f"fp16 conversion failed: {type(exc).__name__}: {exc}",
            hint="export without --fp16, or report the model",
            details={"step": "fp16_convert"},
        ) from exc
    return model.model


def present_ops(proto: onnx.ModelProto, op_types: Sequence[str]) -> list[str]:
    """The op types of `op_types` that occur in the graph (what a block list actually kept in fp32)."""
    used = {node.op_type for node in proto.graph.node}
    return sorted(used & set(op_types))


def half_module(model: nn.Module) -> nn.Module:
    """A float16 copy of an eager module (the original stays float32: it is the parity reference)."""
    return copy.deepcopy(model).half().eval()
