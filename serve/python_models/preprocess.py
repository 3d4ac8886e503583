"""Triton Python-backend model `<name>_preprocess`: encoded images in, the model's input tensor out.

Published by `modelship publish` as `<version>/model.py`, beside `preprocess.json` (the export's spec) and a copy
of modelship's preprocessing modules (`modelship/`), so it runs the same code as the client and the parity
engine (numpy + Pillow, no torch) in any Triton image that has Pillow. Input `IMAGE` (TYPE_STRING, one encoded
image per batch row), output `PIXELS` (the float tensor) and, when the config declares it, `SIZE` (each original
image's height and width, for a pipeline's postprocess step) and `SCALE` (each image's size over its resized size,
x and y twice, to put a detector's boxes back on the photo). A spec without a crop gives each image its own size, so
the images of one request must then share theirs. Each request succeeds or fails alone: bytes that are not an
image, truncated data, images of different sizes or an image over `max_pixels` (a config parameter) fail only their
own request.
"""

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

from modelship.contract.errors import PreprocessError
from modelship.contract.preprocessing import PreprocessSpec
from modelship.preprocess.image import box_scale, check_one_size, decode_image, transform


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        here = Path(__file__).parent
        self.spec = PreprocessSpec.read(here / "preprocess.json")
        self.max_pixels = int(config["parameters"]["max_pixels"]["string_value"])  # written by modelship publish
        output = pb_utils.get_output_config_by_name(config, "PIXELS")
        self.dtype = pb_utils.triton_string_to_numpy(output["data_type"])
        self.sizes = any(out["name"] == "SIZE" for out in config["output"])
        self.scales = any(out["name"] == "SCALE" for out in config["output"])

    def execute(self, requests):
        return [self._respond(request) for request in requests]

    def _respond(self, request):
        try:
            images = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy().reshape(-1)
            if images.size == 0:
                raise PreprocessError("IMAGE holds no images")
            decoded = [self._decode(item, index) for index, item in enumerate(images)]
            sizes = np.array([(image.height, image.width) for image in decoded], dtype=np.int32)
            check_one_size(sizes.tolist(), self.spec, originals=self.sizes)
            pixels = np.stack([transform(image, self.spec) for image in decoded])
        except PreprocessError as exc:
            return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(f"preprocess: {exc}"))
        outputs = [pb_utils.Tensor("PIXELS", pixels.astype(self.dtype, copy=False))]
        if self.sizes:
            outputs.append(pb_utils.Tensor("SIZE", sizes))
        if self.scales:
            outputs.append(pb_utils.Tensor("SCALE", np.stack([box_scale(h, w, self.spec) for h, w in sizes.tolist()])))
        return pb_utils.InferenceResponse(outputs)

    def _decode(self, item, index):
        if not isinstance(item, bytes):
            raise PreprocessError(f"image {index}: expected encoded bytes, got {type(item).__name__}")
        return decode_image(item, apply_exif=self.spec.apply_exif, max_pixels=self.max_pixels, source=f"image {index}")
