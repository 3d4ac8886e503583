"""Triton Python-based backend `onnxruntime`: serves `platform: "onnxruntime_onnx"` models with ONNX Runtime.

Copied into the server's backend directory as `onnxruntime/model.py` (with modelship_backend.py); Triton runs it
inside its Python stub for every model whose platform maps to the `onnxruntime` backend. Self-contained on purpose
(numpy, onnxruntime and Triton's `triton_python_backend_utils` only): it works in any Triton image that has them.

At load it checks the config against the graph with the native backend's rules and messages (input count, names,
data types, dims with the implicit batch dimension), so a config the native backend refuses fails here too, at
load, never at warmup.

Config parameters honoured (named as Triton's native ONNX Runtime backend names them where it has one):
  intra_op_thread_count   threads per instance (default: CPU cores / instance count)
  disabled_optimizers     comma-separated ORT graph optimizers to skip. Stand-in only (the native backend has no
                          such parameter and ignores it): the publisher sets "NchwcTransformer" for fp16 graphs,
                          since ONNX Runtime 1.31 segfaults creating a CPU session for fp16 ViTs otherwise.
"""

import json
import os

import onnxruntime as ort
import triton_python_backend_utils as pb_utils
from modelship_backend import ConfigError, check_tensors, execute, parameter, threads

ORT_TYPES = {  # ONNX Runtime type string -> Triton data type
    "tensor(float)": "TYPE_FP32",
    "tensor(float16)": "TYPE_FP16",
    "tensor(bfloat16)": "TYPE_BF16",
    "tensor(double)": "TYPE_FP64",
    "tensor(int64)": "TYPE_INT64",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int16)": "TYPE_INT16",
    "tensor(int8)": "TYPE_INT8",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(bool)": "TYPE_BOOL",
    "tensor(string)": "TYPE_STRING",
}


def model_tensors(args):
    """{name: (TYPE_xxx, shape with -1 for dynamic dims)} of ONNX Runtime session inputs or outputs."""
    return {
        t.name: (ORT_TYPES.get(t.type, t.type), [d if isinstance(d, int) and d >= 0 else -1 for d in t.shape])
        for t in args
    }


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        filename = config.get("default_model_filename") or "model.onnx"
        path = os.path.join(args["model_repository"], args["model_version"], filename)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads(config)
        options.inter_op_num_threads = 1
        providers: list[str | tuple[str, dict[str, int]]] = ["CPUExecutionProvider"]
        if args.get("model_instance_kind") == "GPU" and "CUDAExecutionProvider" in ort.get_available_providers():
            device = int(args.get("model_instance_device_id", 0))
            providers = [("CUDAExecutionProvider", {"device_id": device}), "CPUExecutionProvider"]
        disabled = [name.strip() for name in parameter(config, "disabled_optimizers").split(",") if name.strip()]
        self.session = ort.InferenceSession(path, options, providers=providers, disabled_optimizers=disabled)
        try:
            check_tensors(config, "input", model_tensors(self.session.get_inputs()), exact=False)
            check_tensors(config, "output", model_tensors(self.session.get_outputs()), exact=True)
        except ConfigError as exc:
            raise pb_utils.TritonModelException(str(exc)) from None
        self.input_names = [i["name"] for i in config["input"]]
        self.output_names = [o["name"] for o in config["output"]]
        self.batched = int(config.get("max_batch_size", 0)) > 0

    def run(self, feed):
        return dict(zip(self.output_names, self.session.run(self.output_names, feed), strict=True))

    def execute(self, requests):
        return execute(requests, self.input_names, self.run, self.batched, "onnxruntime")
