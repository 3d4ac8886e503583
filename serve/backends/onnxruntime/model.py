"""Triton Python-based backend `onnxruntime`: serves `platform: "onnxruntime_onnx"` models with ONNX Runtime.

Copied into the server's backend directory as `onnxruntime/model.py` (with modelship_backend.py); Triton runs it
inside its Python stub for every model whose platform maps to the `onnxruntime` backend. Self-contained on purpose
(numpy, onnxruntime and Triton's `triton_python_backend_utils` only): it works in any Triton image that has them.

Config parameters honoured (named as Triton's native ONNX Runtime backend names them where it has one):
  intra_op_thread_count   threads per instance (default: CPU cores / instance count)
  disabled_optimizers     comma-separated ORT graph optimizers to skip; the publisher sets "NchwcTransformer"
                          for fp16 graphs (ORT 1.31 segfaults creating a CPU session for fp16 ViT otherwise)
"""

import json
import os

import onnxruntime as ort
from modelship_backend import execute, parameter, threads


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        filename = config.get("default_model_filename") or "model.onnx"
        path = os.path.join(args["model_repository"], args["model_version"], filename)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads(config)
        options.inter_op_num_threads = 1
        providers = ["CPUExecutionProvider"]
        if args.get("model_instance_kind") == "GPU" and "CUDAExecutionProvider" in ort.get_available_providers():
            device = int(args.get("model_instance_device_id", 0))
            providers = [("CUDAExecutionProvider", {"device_id": device}), "CPUExecutionProvider"]
        disabled = [name.strip() for name in parameter(config, "disabled_optimizers").split(",") if name.strip()]
        self.session = ort.InferenceSession(path, options, providers=providers, disabled_optimizers=disabled)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.batched = int(config.get("max_batch_size", 0)) > 0

    def run(self, feed):
        return dict(zip(self.output_names, self.session.run(self.output_names, feed), strict=True))

    def execute(self, requests):
        return execute(requests, self.input_names, self.run, self.batched, "onnxruntime")
