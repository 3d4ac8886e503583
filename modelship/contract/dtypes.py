"""The one dtype table: every tensor dtype an I/O spec may name, with its Triton config type and the type string
ONNX Runtime reports for it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # as numpy and torch name it (the I/O spec's spelling)
    triton: str  # model_config DataType
    onnxruntime: str  # NodeArg.type


TABLE = {
    d.name: d
    for d in (
        DType("float32", "TYPE_FP32", "tensor(float)"),
        DType("float16", "TYPE_FP16", "tensor(float16)"),
        DType("bfloat16", "TYPE_BF16", "tensor(bfloat16)"),
        DType("float64", "TYPE_FP64", "tensor(double)"),
        DType("int64", "TYPE_INT64", "tensor(int64)"),
        DType("int32", "TYPE_INT32", "tensor(int32)"),
        DType("int8", "TYPE_INT8", "tensor(int8)"),
        DType("uint8", "TYPE_UINT8", "tensor(uint8)"),
        DType("bool", "TYPE_BOOL", "tensor(bool)"),
    )
}
DTYPES = tuple(TABLE)
BY_ONNXRUNTIME = {d.onnxruntime: d.name for d in TABLE.values()}
