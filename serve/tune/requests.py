"""One request a served model takes, built from what the server says about it (its metadata and the preprocessing
spec publish wrote into its config): random floats, zero integers (an id outside an embedding would fail), batch 1;
a dynamic image side the spec's size (else 224) in the spec's layout, any other dynamic axis SEQUENCE long. A
pipeline's bytes: a photo-sized JPEG for an image pipeline, a sentence of SENTENCE_WORDS words for a text one."""

from __future__ import annotations

import io

import numpy as np

from modelship.contract.preprocessing import Layout, PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.serve.image_pipeline import IMAGE
from modelship.serve.model_info import ModelInfo

IMAGE_SIDE = 224
SEQUENCE = 128
PHOTO_HW = (480, 640)  # what a camera or a web upload sends, decoded and resized by the pipeline
SENTENCE_WORDS = 24


def request_inputs(info: ModelInfo, seed: int = 0) -> Tensors:
    rng = np.random.default_rng(seed)
    arrays = {}
    for tensor in info.inputs:
        batched = info.max_batch_size > 0
        shape = _filled(list(tensor.shape[1:] if batched else tensor.shape), info.preprocess)
        full = [1, *shape] if batched else shape
        if tensor.dtype.kind == "O":
            item = _photo(rng) if tensor.name == IMAGE else _sentence(rng)
            arrays[tensor.name] = np.full(full, item, dtype=np.object_)
        elif tensor.dtype.kind == "f":
            arrays[tensor.name] = rng.standard_normal(full).astype(tensor.dtype)
        else:
            arrays[tensor.name] = np.zeros(full, dtype=tensor.dtype)
    return arrays


def _filled(shape: list[int], spec: PreprocessSpec | None) -> list[int]:
    if len(shape) != 3:
        return [d if d > 0 else SEQUENCE for d in shape]
    height, width = spec.output_hw if spec is not None and spec.output_hw else (IMAGE_SIDE, IMAGE_SIDE)
    named = [height, width, 3] if spec is not None and spec.layout is Layout.NHWC else [3, height, width]
    return [d if d > 0 else n for d, n in zip(shape, named, strict=True)]


def _photo(rng: np.random.Generator) -> bytes:
    """A JPEG of PHOTO_HW: smooth colour ramps with mild noise, so it compresses and decodes like a photo."""
    from PIL import Image

    height, width = PHOTO_HW
    ramps = np.stack(np.meshgrid(np.linspace(0, 200, width), np.linspace(30, 230, height)), axis=-1)
    pixels = np.concatenate([ramps, ramps[..., :1] * 0.5 + 60], axis=-1) + rng.normal(0, 8, (height, width, 3))
    buffer = io.BytesIO()
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _sentence(rng: np.random.Generator) -> bytes:
    words = ("the", "model", "answers", "every", "request", "within", "its", "budget", "while", "a", "server", "runs")
    return " ".join(rng.choice(words, SENTENCE_WORDS)).encode()
