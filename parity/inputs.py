"""Seeded test inputs that respect each input's dtype and value range."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from modelship.contract.errors import UsageError
from modelship.contract.iospec import BATCH, IOSpec, TensorSpec
from modelship.contract.preprocessing import Layout, PreprocessSpec
from modelship.contract.tensors import Tensors

DEFAULT_DIM_SIZE = 16  # size given to dynamic dimensions other than "batch" (e.g. "sequence") unless told
DEFAULT_INT_RANGE = (0, 2)  # integer inputs without a value_range: 0/1, valid for any embedding or mask


def random_inputs(io: IOSpec, sizes: dict[str, int], seed: int = 0) -> Tensors:
    """One array per input, keyed by input name, shaped by `sizes` for the named dimensions.

    Floats are N(0, 1), or uniform in `value_range` when the spec has one; integers are uniform in
    `[low, high)` of `value_range` (default 0/1); bools are 0/1. An integer input with value_range (0, 2) is a
    mask: its first position along axis 1 is set to 1 so no sequence is fully masked out.
    """
    rng = np.random.default_rng(seed)
    return {spec.name: _random_tensor(spec, spec.concrete_shape(sizes), rng) for spec in io.inputs}


def input_sets(
    io: IOSpec, batch_sizes: Sequence[int], *, seed: int = 0, sizes: dict[str, int] | None = None
) -> list[Tensors]:
    """One `random_inputs` set per batch size (seeds `seed`, `seed + 1`, ...). Other dynamic dimensions take
    `sizes[name]`, else DEFAULT_DIM_SIZE."""
    named = {d for spec in io.inputs for d in spec.shape if isinstance(d, str)} - {BATCH}
    base = {name: DEFAULT_DIM_SIZE for name in named} | dict(sizes or {})
    return [random_inputs(io, base | {BATCH: b}, seed + i) for i, b in enumerate(batch_sizes)]


def _random_tensor(spec: TensorSpec, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if spec.dtype == "bfloat16":
        raise UsageError(f"input {spec.name!r}: bfloat16 inputs cannot be generated with numpy", hint="use float32")
    dtype = np.dtype(spec.dtype)
    if np.issubdtype(dtype, np.floating):
        if spec.value_range is None:
            return rng.standard_normal(shape, dtype=np.float32).astype(dtype)
        low, high = spec.value_range
        return rng.uniform(low, high, size=shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    low, high = spec.value_range or (*DEFAULT_INT_RANGE,)
    if high <= low:
        raise UsageError(f"input {spec.name!r}: empty value_range {spec.value_range}", hint="high must exceed low")
    values = rng.integers(int(low), int(high), size=shape).astype(dtype)
    if (low, high) == (0, 2) and values.ndim >= 2:
        values[:, 0] = 1
    return values


def image_sizes(io: IOSpec, spec: PreprocessSpec | None) -> dict[str, int]:
    """The sizes of an image input's named height and width when its preprocessing makes one size (a crop, or an
    exact resize): the size the model was exported at, which a model with strided convolutions may need (an image
    of DEFAULT_DIM_SIZE pixels can be smaller than its kernels). Empty otherwise."""
    if spec is None or spec.output_hw is None or not io.inputs or len(io.inputs[0].shape) != 4:
        return {}
    axes = io.inputs[0].shape[1:3] if spec.layout is Layout.NHWC else io.inputs[0].shape[2:]
    return {axis: size for axis, size in zip(axes, spec.output_hw, strict=True) if isinstance(axis, str)}
