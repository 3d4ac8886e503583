"""Triton Python-based backend `pytorch`: serves `platform: "pytorch_libtorch"` TorchScript models.

Copied into the server's backend directory as `pytorch/model.py` (with modelship_backend.py). Follows the native
LibTorch backend's conventions: inputs `INPUT__0`, `INPUT__1`, ... are the forward arguments in order; outputs
`OUTPUT__0`, ... are the returned tensors in order (a tuple, list, named tuple or dict is flattened depth first in
its own order, the order modelship's exporters name outputs in). Self-contained: torch, numpy and Triton's utils.

Config parameters honoured: `intra_op_thread_count` (torch threads; default CPU cores / instance count).
"""

import json
import os

import numpy as np
import torch
from modelship_backend import execute, threads


def flatten(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [tensor for item in value for tensor in flatten(item)]


def position(name):
    return int(name.rsplit("__", 1)[1])


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
        self.input_names = sorted((i["name"] for i in config["input"]), key=position)
        self.output_names = sorted((o["name"] for o in config["output"]), key=position)
        self.batched = int(config.get("max_batch_size", 0)) > 0

    def run(self, feed):
        with torch.inference_mode():
            args = [torch.from_numpy(np.array(feed[name])).to(self.device) for name in self.input_names]
            outputs = flatten(self.model(*args))
        if len(outputs) != len(self.output_names):
            raise ValueError(f"model returned {len(outputs)} tensors, the config declares {len(self.output_names)}")
        return {name: tensor.cpu().numpy() for name, tensor in zip(self.output_names, outputs, strict=True)}

    def execute(self, requests):
        return execute(requests, self.input_names, self.run, self.batched, "pytorch")
