"""One request a served model takes, built from what the server says about it (its metadata and the preprocessing
spec publish wrote into its config): random floats, zero integers (an id outside an embedding would fail), batch 1;
a dynamic image side the spec's size (else 224) in the spec's layout, any other dynamic axis SEQUENCE long."""

from __future__ import annotations

import numpy as np

from modelship.contract.preprocessing import PreprocessSpec
from modelship.serve.model_info import ModelInfo

IMAGE_SIDE = 224
SEQUENCE = 128


def request_inputs(info: ModelInfo, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {}
    for tensor in info.inputs:
        batched = info.max_batch_size > 0
        shape = _filled(list(tensor.shape[1:] if batched else tensor.shape), info.preprocess)
        full = [1, *shape] if batched else shape
        if tensor.dtype.kind == "f":
            arrays[tensor.name] = rng.standard_normal(full).astype(tensor.dtype)
        else:
            arrays[tensor.name] = np.zeros(full, dtype=tensor.dtype)
    return arrays


def _filled(shape: list[int], spec: PreprocessSpec | None) -> list[int]:
    if len(shape) != 3:
        return [d if d > 0 else SEQUENCE for d in shape]
    height, width = spec.output_hw if spec is not None and spec.output_hw else (IMAGE_SIDE, IMAGE_SIDE)
    named = [height, width, 3] if spec is not None and spec.layout == "NHWC" else [3, height, width]
    return [d if d > 0 else n for d, n in zip(shape, named, strict=True)]
