"""Benchmark suites. Each is `run(workspace) -> list[Row]`; SUITES lists them in the order `modelship bench` runs
them (export first: its fp16 export of the main model is reused by every later suite). `--quick` runs QUICK_SUITES
with the quick plan: serving with its peers, in about 3 minutes on 2 idle cores. ON_REQUEST suites run only when
named."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from modelship.bench.report import Row
from modelship.bench.workspace import Workspace

# name (= its module here) -> what it measures
SUITES: dict[str, str] = {
    "export": "export-model per step vs the bare library calls; parity overhead",
    "serving": "throughput through Triton (gRPC, HTTP) vs in-process ONNX Runtime; the FastAPI and PyTriton peers",
    "transport": "binary HTTP vs gRPC vs system shared memory, 8x3x224x224 fp32",
    "pipeline": "encoded JPEG in, logits out: server-side preprocessing vs the same work in-process",
    "fleet": "rollout time from S3 vs a folder for 1 and 3 servers; 2 servers round robin vs 1",
    "vision": "a photo in, the class mask or the boxes out: segmentation and detection pipelines vs in-process",
    "text": "a text in, an embedding out: server-side tokenization vs the same work in-process (MiniLM)",
    "precision": "INT8 and fp16 vs fp32 in-process (resnet50, mobilenet_v3_large, the real EfficientNet-Lite0 and "
    "MobileNetV2, MiniLM) with their accuracy; served INT8 vs served fp32",
    "tune": "modelship tune's search vs brute force on one grid through Triton: best throughput within p99 200 ms, "
    "points measured, minutes",
}
QUICK_SUITES = ("serving", "transport")
ON_REQUEST = ("tune",)  # brute force takes about half an hour per model: run when named (--suite tune)


def suite(name: str) -> Callable[[Workspace], list[Row]]:
    return importlib.import_module(f"{__name__}.{name}").run
