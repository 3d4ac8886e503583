"""Triton Python-based backend `pytorch`: serves `platform: "pytorch_libtorch"` TorchScript models.

Copied into the server's backend directory as `pytorch/model.py` (with modelship_backend.py). Follows the native
LibTorch backend's conventions: config inputs are forward()'s argument names, or `<name>__<index>` (INPUT__0,
INPUT__1, ...), or else taken in config order; outputs are `<name>__<index>` (OUTPUT__0, ...) or config order, and
map onto the returned tensors in order (a tuple, list, named tuple or dict is flattened depth first in its own
order, the order modelship's exporters name outputs in). As natively: the input count must match forward()'s
arguments at load; at inference an output the model does not return, or of another data type than the config
says, fails that request with the native backend's message. Self-contained: torch, torchvision (its operators,
as the native backend links libtorchvision: a scripted detector calls torchvision::nms), numpy and Triton's utils.

Config parameters honoured: `intra_op_thread_count` (torch threads; default CPU cores / instance count).
"""

import json
import os

import numpy as np
import torch
import torchvision  # noqa: F401 (its operators, nms and roi_align: the native backend links libtorchvision)
import triton_python_backend_utils as pb_utils
from modelship_backend import ConfigError, execute, threads, torch_argument_order, torch_output_order

TORCH_TYPES = {
    torch.float32: "TYPE_FP32",
    torch.float16: "TYPE_FP16",
    torch.bfloat16: "TYPE_BF16",
    torch.float64: "TYPE_FP64",
    torch.int64: "TYPE_INT64",
    torch.int32: "TYPE_INT32",
    torch.int16: "TYPE_INT16",
    torch.int8: "TYPE_INT8",
    torch.uint8: "TYPE_UINT8",
    torch.bool: "TYPE_BOOL",
}


def flatten(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [tensor for item in value for tensor in flatten(item)]


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        filename = config.get("default_model_filename") or "model.pt"
        path = os.path.join(args["model_repository"], args["model_version"], filename)
        torch.set_num_threads(threads(config))
        self.device = torch.device("cpu")
        if args.get("model_instance_kind") == "GPU" and torch.cuda.is_available():
            self.device = torch.device("cuda", int(args.get("model_instance_device_id", 0)))
        self.model = torch.jit.load(path, map_location=self.device).eval()
        forward = [a.name for a in self.model.forward.schema.arguments[1:]]
        try:
            self.input_names = torch_argument_order(config, forward)
            self.output_names = torch_output_order(config)
        except ConfigError as exc:
            raise pb_utils.TritonModelException(str(exc)) from None
        self.output_types = {o["name"]: o.get("data_type") for o in config["output"]}
        self.batched = int(config.get("max_batch_size", 0)) > 0

    def run(self, feed):
        with torch.inference_mode():
            args = [torch.from_numpy(np.array(feed[name])).to(self.device) for name in self.input_names]
            outputs = flatten(self.model(*args))
        result = {}
        for index, name in enumerate(self.output_names):
            if index >= len(outputs):
                raise ValueError(
                    f"The output {name} in the model configuration refers to an output index which doesn't exist. "
                    f"This model has {len(outputs)} outputs"
                )
            provided = TORCH_TYPES.get(outputs[index].dtype, str(outputs[index].dtype))
            if provided != self.output_types[name]:
                raise ValueError(
                    f"configuration expects datatype {self.output_types[name]} for output '{name}', "
                    f"model provides {provided}"
                )
            result[name] = outputs[index].cpu().numpy()
        return result

    def execute(self, requests):
        return execute(requests, self.input_names, self.run, self.batched, "pytorch")
