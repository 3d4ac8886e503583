"""Triton Python-backend model `<name>_postprocess` of a detection pipeline whose preprocessing resizes (a Hugging
Face DETR's): the detector's boxes, in the resized input's pixels, put back on the photo.

Published by `modelship publish` as the last step of the `<name>_pipeline`. Inputs `BOXES` (the model's boxes, x1,
y1, x2, y2 per row) and `SCALE` (from `<name>_preprocess`: each photo's size over its resized size, x and y twice);
output `BOXES` in the photo's pixels, as `post_process_object_detection(..., target_sizes=[photo size])` scales them.
Padding rows (all zero) stay zero. numpy only.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [self._respond(request) for request in requests]

    def _respond(self, request):
        boxes = pb_utils.get_input_tensor_by_name(request, "BOXES").as_numpy()
        scale = pb_utils.get_input_tensor_by_name(request, "SCALE").as_numpy()
        scaled = boxes.reshape(scale.reshape(-1, 4).shape[0], -1, 4) * scale.reshape(-1, 1, 4)
        return pb_utils.InferenceResponse([pb_utils.Tensor("BOXES", scaled.reshape(boxes.shape).astype(boxes.dtype))])
