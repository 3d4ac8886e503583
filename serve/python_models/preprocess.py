"""Triton Python-backend model `<name>_preprocess`: encoded images in, the model's input tensor out.

Published by `modelship publish` as `<version>/model.py`, beside `preprocess.json` (the export's spec) and a copy
of modelship's preprocessing modules (`modelship/`), so it runs the same code as the client and the parity
engine (numpy + Pillow, no torch) in any Triton image that has Pillow. Input `IMAGE` (TYPE_STRING, one encoded
image per batch row), output `PIXELS` (the float tensor). Each request succeeds or fails alone: bytes that are not
an image, truncated data or an image over `max_pixels` (a config parameter) fail only their own request.
"""

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

from modelship.contract.errors import PreprocessError
from modelship.contract.preprocessing import PreprocessSpec
from modelship.preprocess.image import decode_image, transform


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        here = Path(__file__).parent
        self.spec = PreprocessSpec.read(here / "preprocess.json")
        self.max_pixels = int(config["parameters"]["max_pixels"]["string_value"])  # written by modelship publish
        output = pb_utils.get_output_config_by_name(config, "PIXELS")
        self.dtype = pb_utils.triton_string_to_numpy(output["data_type"])

    def execute(self, requests):
        return [self._respond(request) for request in requests]

    def _respond(self, request):
        try:
            images = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy().reshape(-1)
            if images.size == 0:
                raise PreprocessError("IMAGE holds no images")
            pixels = np.stack([self._one(item, index) for index, item in enumerate(images)])
        except PreprocessError as exc:
            return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(f"preprocess: {exc}"))
        return pb_utils.InferenceResponse([pb_utils.Tensor("PIXELS", pixels.astype(self.dtype, copy=False))])

    def _one(self, item, index):
        if not isinstance(item, bytes):
            raise PreprocessError(f"image {index}: expected encoded bytes, got {type(item).__name__}")
        image = decode_image(item, apply_exif=self.spec.apply_exif, max_pixels=self.max_pixels, source=f"image {index}")
        return transform(image, self.spec)
