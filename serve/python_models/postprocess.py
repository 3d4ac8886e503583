"""Triton Python-backend model `<name>_postprocess`: a segmenter's class scores in, the class mask out.

Published by `modelship publish` as the last step of a segmentation `<name>_pipeline`, beside a copy of modelship's
numpy-only modules, so the server's mask is the one `modelship infer` computes from the scores. Inputs `SCORES`
([classes, h, w] per row, the model's first output) and `SIZE` (the original image's height and width, from
`<name>_preprocess`); outputs `MASK` ([height, width] class indices at the original image's size) and, when a
request asks for them, the `SCORES` as they came. Each request succeeds or fails alone.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from modelship.contract.errors import PreprocessError
from modelship.postprocess import class_mask


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        output = pb_utils.get_output_config_by_name(config, "MASK")
        self.dtype = pb_utils.triton_string_to_numpy(output["data_type"])

    def execute(self, requests):
        return [self._respond(request) for request in requests]

    def _respond(self, request):
        try:
            scores = pb_utils.get_input_tensor_by_name(request, "SCORES").as_numpy()
            sizes = pb_utils.get_input_tensor_by_name(request, "SIZE").as_numpy().reshape(-1, 2)
            if len({tuple(size) for size in sizes.tolist()}) != 1:
                raise PreprocessError("the images of one request must share their size")
            masks = np.stack([class_mask(row, tuple(size)) for row, size in zip(scores, sizes, strict=True)])
        except PreprocessError as exc:
            return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(f"postprocess: {exc}"))
        outputs = [pb_utils.Tensor("MASK", masks.astype(self.dtype, copy=False))]
        if "SCORES" in request.requested_output_names():
            outputs.append(pb_utils.Tensor("SCORES", scores))
        return pb_utils.InferenceResponse(outputs)
