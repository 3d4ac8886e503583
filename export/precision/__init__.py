"""Precision variants: everything that makes an artifact at a precision other than fp32, in one package.

    registry.py   the variants of each format (one registration each: file, step, options and flags, check,
                  explanation)
    fallback.py   the one keep-in-higher-precision search (Bisect, Grow), driven by verdicts
    fp16/         half precision: conversion, measured ranges, the TorchScript and ONNX variants, explanations
    int8/         INT8 ONNX: recipes, the planner, quantization, ranking, timing, the graph it is quantized from

Intermediate tensors are read through parity.probe (one probe), nodes named by parity.onnx_graph.name_nodes, and
named arrays are contract.tensors.Tensors. A new precision is a subpackage here registering its variants (and its
tolerances with contract.precisions.register_precision); docs/architecture.md says where each part goes.
"""

from modelship.export.precision import fp16, int8  # noqa: F401 (their variants register)
