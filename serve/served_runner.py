"""A parity-engine Runner backed by a served Triton model: `modelship parity EXPORT_DIR --served URL`.

Inputs and outputs are keyed by the export manifest's names. The served names can differ (LibTorch models take
`INPUT__0`, return `OUTPUT__0`); the mapping is read from the model's config (`modelship.io`, written by
`modelship publish`). Float inputs are cast to the served float dtype, as the local ONNX Runtime runner does, so
the same float32 test inputs drive fp32 and fp16-I/O models. A pipeline model (`<name>_pipeline`) gets the image
files' bytes instead: the server decodes and preprocesses them. The runner declares the model's `max_batch_size`
as its batch limit, so the engine sends a larger input set as several requests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from modelship.contract.errors import ClientError
from modelship.contract.tensors import Tensors
from modelship.parity.image_inputs import IMAGES
from modelship.parity.runner_protocol import BaseRunner, SetKind
from modelship.parity.text_sets import TEXTS
from modelship.serve.client import TritonClient
from modelship.serve.model_info import ModelInfo
from modelship.serve.protocols import WireProtocol
from modelship.serve.text_pipeline import TEXT


class TritonRunner(BaseRunner):
    """Runs `model_name` on the Triton server at `url` (http://, grpc:// or host:port with `protocol`)."""

    def __init__(
        self, url: str, model_name: str, protocol: WireProtocol = WireProtocol.HTTP, name: str | None = None
    ) -> None:
        self.client = TritonClient(url, protocol=None if "://" in url else protocol)  # a URL's scheme wins
        self.model_name = model_name
        self.name = name or f"triton:{model_name}"
        self._info: ModelInfo | None = None

    @property
    def info(self) -> ModelInfo:
        if self._info is None:
            self._info = self.client.model(self.model_name)
        return self._info

    @property
    def max_batch(self) -> int | None:
        """The served model's max_batch_size: the parity engine splits larger input sets into requests of it. A
        model without a batch axis whose inputs take one row (a single-row ONNX detector) gets one at a time."""
        info = self.info
        if info.max_batch_size:
            return info.max_batch_size
        return 1 if info.inputs and all(t.shape[:1] == (1,) for t in info.inputs) else None

    @property
    def takes(self) -> SetKind:
        """IMAGES for an image pipeline (serve.image_pipeline): one TYPE_STRING input of encoded images, decoded and
        preprocessed by the server; it runs on image-file input sets (`{"images": paths}`) only. TEXTS for a
        text pipeline (serve.text_pipeline: its input TEXT), run on sets of texts (`{"texts": strings}`)."""
        inputs = self.info.inputs
        if len(inputs) != 1 or inputs[0].datatype != "BYTES":
            return SetKind.TENSORS
        return SetKind.TEXTS if inputs[0].name == TEXT else SetKind.IMAGES

    def run(self, inputs: Tensors) -> Tensors:
        if self.takes is SetKind.TEXTS:
            return self._run_texts(inputs)
        if self.takes is SetKind.IMAGES:
            return self._run_images(inputs)
        info = self.info
        names = info.io_names
        missing = sorted(set(names.inputs.values()) - set(inputs))
        if missing:
            raise ClientError(f"{self.name}: no value for inputs {missing}", hint=f"inputs: {sorted(inputs)}")
        feeds = {}
        for served, manifest_name in names.inputs.items():
            array = np.asarray(inputs[manifest_name])
            dtype = info.input(served).dtype
            feeds[served] = array.astype(dtype, copy=False) if array.dtype.kind == dtype.kind == "f" else array
        outputs = self.client.infer(self.model_name, feeds)
        return {names.outputs.get(served, served): value for served, value in outputs.items()}

    def _run_images(self, inputs: Tensors) -> Tensors:
        if IMAGES not in inputs:
            raise ClientError(f"{self.name} takes encoded images", hint="compare it on image files: --images DIR")
        files = [Path(p).read_bytes() for p in inputs[IMAGES]]
        encoded = np.array([[data] for data in files], dtype=object)
        return self.client.infer(self.model_name, {self.info.inputs[0].name: encoded})

    def _run_texts(self, inputs: Tensors) -> Tensors:
        if TEXTS not in inputs:
            raise ClientError(f"{self.name} takes texts", hint="compare it on texts: --texts FILE")
        encoded = np.array([[str(t).encode("utf-8")] for t in inputs[TEXTS]], dtype=object)
        return self.client.infer(self.model_name, {TEXT: encoded})

    def close(self) -> None:
        self.client.close()
